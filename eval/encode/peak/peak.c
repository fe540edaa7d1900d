// The peak arithmetic rates of this CPU's AVX2 units, and the clock they ran at, for the
// encoder's floor (eval/encode/peak/README.md). Each kernel is a loop of independent register
// chains (inline assembly, so that the compiler can neither hoist nor drop the loop-invariant
// work), or an L1-resident micro-kernel of the shape the encoder's GEMMs use; each runs TRIALS
// trials of about TRIAL_MS on 1 and on 2 threads, all kernels alternating trial by trial, so a
// quiet slice of a shared machine shows in the best trial and the median says what load did.
//   clang (or gcc) -O2 -mavx2 -mfma -pthread eval/encode/peak/peak.c -o /tmp/peak && /tmp/peak [TRIALS=200] [TRIAL_MS=20]
// (eval/encode/peak/peak.sh runs it and writes peak.{json,md}).
// Prints one JSON object (rates in G units per second, all threads together).
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define REP2(x) x x
#define REP4(x) REP2(x) REP2(x)
#define REP10(x) REP4(x) REP4(x) REP2(x)
#define REP100(x) REP10(REP10(x))
#define YMM_ALL "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", \
  "ymm10", "ymm11", "ymm12", "ymm13", "ymm14", "ymm15"

// The integer chains' set-up: accumulators ymm0-5 zeroed, ymm13 the i16 ones of vpmaddwd,
// ymm14 and ymm15 the operands (all-ones bytes, and 0x007f words: values do not change the
// rate). CHAIN_LOOP_END closes every chain loop, with all vector registers clobbered.
#define INT_SETUP                                                                   \
  "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"                                                \
  "vmovdqa %%ymm0, %%ymm1\n\t vmovdqa %%ymm0, %%ymm2\n\t vmovdqa %%ymm0, %%ymm3\n\t" \
  "vmovdqa %%ymm0, %%ymm4\n\t vmovdqa %%ymm0, %%ymm5\n\t"                           \
  "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\t vpsrlw $15, %%ymm13, %%ymm13\n\t"          \
  "vpcmpeqb %%ymm14, %%ymm14, %%ymm14\n\t vpsrlw $9, %%ymm14, %%ymm15\n\t"
// Six chains of the STEP(accumulator, temporary) defined where it is used.
#define SIX_CHAINS                                                                  \
  STEP("ymm0", "ymm6") STEP("ymm1", "ymm7") STEP("ymm2", "ymm8")                     \
  STEP("ymm3", "ymm9") STEP("ymm4", "ymm10") STEP("ymm5", "ymm11")
#define CHAIN_LOOP_END "dec %0\n\t jnz 1b\n\t vzeroupper" : "+r"(n)::YMM_ALL, "cc"

// 12 independent FMA chains (latency 5 on Zen, so 12 cover two pipes' worth); 16 FLOP each.
static void fma_chains(long n, void *scratch) {
  (void)scratch;
  __asm__ volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
      "vmovaps %%ymm0, %%ymm1\n\t vmovaps %%ymm0, %%ymm2\n\t vmovaps %%ymm0, %%ymm3\n\t"
      "vmovaps %%ymm0, %%ymm4\n\t vmovaps %%ymm0, %%ymm5\n\t vmovaps %%ymm0, %%ymm6\n\t"
      "vmovaps %%ymm0, %%ymm7\n\t vmovaps %%ymm0, %%ymm8\n\t vmovaps %%ymm0, %%ymm9\n\t"
      "vmovaps %%ymm0, %%ymm10\n\t vmovaps %%ymm0, %%ymm11\n\t vmovaps %%ymm0, %%ymm14\n\t"
      "vmovaps %%ymm0, %%ymm15\n\t"
      "1:\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\t vfmadd231ps %%ymm14, %%ymm15, %%ymm1\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n\t vfmadd231ps %%ymm14, %%ymm15, %%ymm3\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n\t vfmadd231ps %%ymm14, %%ymm15, %%ymm5\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n\t vfmadd231ps %%ymm14, %%ymm15, %%ymm7\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n\t vfmadd231ps %%ymm14, %%ymm15, %%ymm9\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm10\n\t vfmadd231ps %%ymm14, %%ymm15, %%ymm11\n\t"
      CHAIN_LOOP_END);
}

// The AVX2 int8 idiom without VNNI, 6 independent chains: vpmaddubsw (32 u8 x s8 products,
// pairs summed to i16), vpmaddwd by ones (pairs to i32), vpaddd into the accumulator; 32
// multiply-adds per chain step.
static void int8_chains(long n, void *scratch) {
  (void)scratch;
  __asm__ volatile(
      INT_SETUP
      "1:\n\t"
#define STEP(acc, tmp)                              \
  "vpmaddubsw %%ymm14, %%ymm15, %%" tmp "\n\t"      \
  "vpmaddwd %%ymm13, %%" tmp ", %%" tmp "\n\t"      \
  "vpaddd %%" tmp ", %%" acc ", %%" acc "\n\t"
      SIX_CHAINS
#undef STEP
      CHAIN_LOOP_END);
}

// The same with the encoder's extra vpsignb per step (the activation's sign moved onto the
// weight, src/encoder/gemm/int8_avx2.rs): 4 instructions per 32 multiply-adds.
static void int8_sign_chains(long n, void *scratch) {
  (void)scratch;
  __asm__ volatile(
      INT_SETUP
      "1:\n\t"
#define STEP(acc, tmp)                              \
  "vpsignb %%ymm14, %%ymm12, %%" tmp "\n\t"         \
  "vpmaddubsw %%" tmp ", %%ymm15, %%" tmp "\n\t"    \
  "vpmaddwd %%ymm13, %%" tmp ", %%" tmp "\n\t"      \
  "vpaddd %%" tmp ", %%" acc ", %%" acc "\n\t"
      SIX_CHAINS
#undef STEP
      CHAIN_LOOP_END);
}

// Two vpmaddubsw summed by vpaddw before one vpmaddwd, 4 chains: 64 multiply-adds per
// vpmaddwd instead of 32. Exact only where two pair sums fit an i16 (|a| <= 127 and |w| <= 63,
// 7-bit weights): what halving the vpmaddwd would buy, were that accuracy affordable.
static void int8_paddw_chains(long n, void *scratch) {
  (void)scratch;
  __asm__ volatile(
      INT_SETUP
      "1:\n\t"
#define STEP(acc, t1, t2)                           \
  "vpmaddubsw %%ymm14, %%ymm15, %%" t1 "\n\t"      \
  "vpmaddubsw %%ymm14, %%ymm15, %%" t2 "\n\t"      \
  "vpaddw %%" t2 ", %%" t1 ", %%" t1 "\n\t"         \
  "vpmaddwd %%ymm13, %%" t1 ", %%" t1 "\n\t"       \
  "vpaddd %%" t1 ", %%" acc ", %%" acc "\n\t"
      STEP("ymm0", "ymm4", "ymm5") STEP("ymm1", "ymm6", "ymm7")
      STEP("ymm2", "ymm8", "ymm9") STEP("ymm3", "ymm10", "ymm11")
#undef STEP
      CHAIN_LOOP_END);
}

// 16-bit inputs: vpmaddwd (16 i16 x i16 products, pairs to i32) and vpaddd, 6 chains; 16
// multiply-adds per step.
static void int16_chains(long n, void *scratch) {
  (void)scratch;
  __asm__ volatile(
      INT_SETUP
      "1:\n\t"
#define STEP(acc, tmp)                              \
  "vpmaddwd %%ymm14, %%ymm15, %%" tmp "\n\t"        \
  "vpaddd %%" tmp ", %%" acc ", %%" acc "\n\t"
      SIX_CHAINS
#undef STEP
      CHAIN_LOOP_END);
}

// 100 dependent integer adds per iteration, one cycle each: iterations x 100 / seconds is the
// core's clock (the loop counter runs beside the chain).
static void add_chain(long n, void *scratch) {
  long x = (long)(intptr_t)scratch;
  __asm__ volatile("1:\n\t" REP100("add $1, %1\n\t") "dec %0\n\t jnz 1b"
                   : "+r"(n), "+r"(x)::"cc");
  __asm__ volatile("" ::"r"(x));
}

// One FMA chain: 5 cycles a step on Zen (Agner Fog's tables), a second reading of the clock.
static void fma_latency(long n, void *scratch) {
  (void)scratch;
  __asm__ volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n\t vmovaps %%ymm0, %%ymm14\n\t vmovaps %%ymm0, %%ymm15\n\t"
      "1:\n\t" REP10("vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\t") "dec %0\n\t jnz 1b\n\t vzeroupper"
      : "+r"(n)::"ymm0", "ymm14", "ymm15", "cc");
}

// The f32 micro-kernel shape of the packed GEMM (src/encoder/gemm): 6 rows by 16 columns in
// 12 accumulators, per input feature 2 vector loads of the packed weights and 6 broadcasts,
// over DEPTH features held in L1 (6 x 256 + 256 x 16 floats, 22 KiB).
#define DEPTH 256
typedef struct {
  float a[DEPTH * 6] __attribute__((aligned(64)));
  float b[DEPTH * 16] __attribute__((aligned(64)));
  float c[6 * 16] __attribute__((aligned(64)));
  int8_t w[DEPTH / 4 * 256] __attribute__((aligned(64)));  // int8 quads, 64 columns each
  uint8_t x[2 * DEPTH] __attribute__((aligned(64)));
  int32_t s[2 * 64] __attribute__((aligned(64)));
} Scratch;

static void f32_microkernel(long n, void *scratch) {
  Scratch *s = scratch;
  for (long i = 0; i < n; i++) {
    __m256 c[6][2];
    // Unrolled in full, so that the accumulators live in registers at -O2.
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++) c[r][0] = c[r][1] = _mm256_load_ps(s->c + r * 16);
    const float *a = s->a, *b = s->b;
    for (int k = 0; k < DEPTH; k++, a += 6, b += 16) {
      __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
      for (int r = 0; r < 6; r++) {
        __m256 x = _mm256_broadcast_ss(a + r);
        c[r][0] = _mm256_fmadd_ps(x, b0, c[r][0]);
        c[r][1] = _mm256_fmadd_ps(x, b1, c[r][1]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < 6; r++) {
      _mm256_store_ps(s->c + r * 16, c[r][0]);
      _mm256_store_ps(s->c + r * 16 + 8, c[r][1]);
    }
  }
}

// The int8 block of src/encoder/gemm/int8_avx2.rs (2 rows by 4 vectors of 8 columns, a
// broadcast quad of activations, its sign moved onto the weights), over 64 columns and DEPTH
// features held in L1 (16 KiB of weights).
static void int8_microkernel(long n, void *scratch) {
  Scratch *s = scratch;
  const __m256i ones = _mm256_set1_epi16(1), offset = _mm256_set1_epi8((char)0x80);
  for (long i = 0; i < n; i++) {
    for (int first = 0; first < 8; first += 4) {
      __m256i acc[2][4];
#pragma GCC unroll 2
      for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[r][v] = _mm256_setzero_si256();
      for (int q = 0; q < DEPTH / 4; q++) {
        const __m256i *w = (const __m256i *)(s->w + q * 256) + first;
        __m256i wv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) wv[v] = _mm256_load_si256(w + v);
#pragma GCC unroll 2
        for (int r = 0; r < 2; r++) {
          int32_t quad;
          memcpy(&quad, s->x + r * DEPTH + q * 4, 4);
          __m256i x = _mm256_xor_si256(_mm256_set1_epi32(quad), offset);
          __m256i mag = _mm256_abs_epi8(x);
#pragma GCC unroll 4
          for (int v = 0; v < 4; v++) {
            __m256i pairs = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(wv[v], x));
            acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
#pragma GCC unroll 2
      for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
          _mm256_store_si256((__m256i *)(s->s + r * 64) + first + v, acc[r][v]);
    }
  }
}

typedef struct {
  const char *name, *unit, *what;
  double per_iter;  // units of work per iteration
  void (*run)(long, void *);
  long iters;       // per trial, calibrated to TRIAL_MS
  double *rates[3]; // [threads] per trial, G units/s over all threads
} Kernel;
#define K(name, unit, what, per_iter, run) {name, unit, what, per_iter, run, 0, {0}}

static Kernel kernels[] = {
    K("fma", "GFLOP/s", "12 independent vfmadd231ps ymm chains (16 FLOP each)", 12 * 16, fma_chains),
    K("int8_maddubs_madd", "GMAC/s", "6 chains of vpmaddubsw + vpmaddwd(ones) + vpaddd (32 int8 MAC each)", 6 * 32, int8_chains),
    K("int8_sign_maddubs_madd", "GMAC/s", "as int8_maddubs_madd plus the encoder's vpsignb per step", 6 * 32, int8_sign_chains),
    K("int8_maddubs_paddw_madd", "GMAC/s", "4 chains of 2 vpmaddubsw + vpaddw + vpmaddwd(ones) + vpaddd (64 int8 MAC each; exact for 7-bit weights only)", 4 * 64, int8_paddw_chains),
    K("int16_madd", "GMAC/s", "6 chains of vpmaddwd + vpaddd (16 int16 MAC each)", 6 * 16, int16_chains),
    K("f32_microkernel", "GFLOP/s", "6x16 f32 GEMM micro-kernel, depth 256, operands in L1", 2.0 * 6 * 16 * DEPTH, f32_microkernel),
    K("int8_microkernel", "GMAC/s", "the encoder's AVX2 int8 block (2 rows x 4 vectors), 64 columns, depth 256, in L1", 2.0 * 64 * DEPTH, int8_microkernel),
    K("clock_add_chain", "GHz", "100 dependent integer adds per iteration (1 cycle each)", 100, add_chain),
    K("clock_fma_latency", "GHz", "one dependent vfmadd231ps chain (5 cycles a step on Zen)", 10 * 5, fma_latency),
};
#define NK (sizeof kernels / sizeof *kernels)

static pthread_barrier_t start_line, finish_line;
static Kernel *job;
static int job_threads, quit;
static Scratch *scratch[2];

static void *helper(void *arg) {
  (void)arg;
  for (;;) {
    pthread_barrier_wait(&start_line);
    if (quit) return NULL;
    if (job_threads == 2) job->run(job->iters, scratch[1]);
    pthread_barrier_wait(&finish_line);
  }
}

// One trial of `k` on `threads` threads: G units per second, all threads together.
static double trial(Kernel *k, int threads) {
  job = k;
  job_threads = threads;
  pthread_barrier_wait(&start_line);
  double t = now();
  k->run(k->iters, scratch[0]);
  pthread_barrier_wait(&finish_line);
  t = now() - t;
  return k->per_iter * k->iters * threads / t / 1e9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int trials = argc > 1 ? atoi(argv[1]) : 200;
  double trial_ms = argc > 2 ? atof(argv[2]) : 20;
  if (trials < 1 || trial_ms <= 0) {
    fprintf(stderr, "usage: peak [TRIALS>=1] [TRIAL_MS>0]\n");
    return 2;
  }
  for (int i = 0; i < 2; i++) {
    scratch[i] = aligned_alloc(64, sizeof(Scratch));
    memset(scratch[i], 1, sizeof(Scratch));
    for (int j = 0; j < DEPTH * 6; j++) scratch[i]->a[j] = 1e-3f;
    for (int j = 0; j < DEPTH * 16; j++) scratch[i]->b[j] = 1e-3f;
    for (int j = 0; j < 96; j++) scratch[i]->c[j] = 0;
  }
  pthread_barrier_init(&start_line, NULL, 2);
  pthread_barrier_init(&finish_line, NULL, 2);
  pthread_t other;
  pthread_create(&other, NULL, helper, NULL);
  // Calibration: the best of 5 short runs sets the iterations of a TRIAL_MS trial.
  for (size_t i = 0; i < NK; i++) {
    Kernel *k = &kernels[i];
    k->iters = 1000;
    double best = 0;
    for (int r = 0; r < 5; r++) {
      double rate = trial(k, 1);
      if (rate > best) best = rate;
    }
    k->iters = (long)(best * 1e9 * trial_ms / 1e3 / k->per_iter) + 1;
    for (int t = 1; t <= 2; t++) k->rates[t] = calloc(trials, sizeof(double));
  }
  uint64_t tsc0 = __rdtsc();
  double wall0 = now();
  for (int r = 0; r < trials; r++)
    for (size_t i = 0; i < NK; i++)
      for (int t = 1; t <= 2; t++) kernels[i].rates[t][r] = trial(&kernels[i], t);
  double tsc_ghz = (__rdtsc() - tsc0) / (now() - wall0) / 1e9;
  quit = 1;
  pthread_barrier_wait(&start_line);
  pthread_join(other, NULL);

  printf("{\n \"trials\": %d,\n \"trial_ms\": %g,\n \"tsc_ghz\": %.4f,\n \"kernels\": [\n", trials, trial_ms, tsc_ghz);
  for (size_t i = 0; i < NK; i++) {
    Kernel *k = &kernels[i];
    printf("  {\"name\": \"%s\", \"unit\": \"%s\", \"what\": \"%s\", \"iters_per_trial\": %ld", k->name, k->unit,
           k->what, k->iters);
    for (int t = 1; t <= 2; t++) {
      qsort(k->rates[t], trials, sizeof(double), cmp);
      printf(", \"threads_%d\": {\"best\": %.3f, \"p90\": %.3f, \"median\": %.3f, \"worst\": %.3f}", t,
             k->rates[t][trials - 1], k->rates[t][(int)(trials * 0.9)], k->rates[t][trials / 2], k->rates[t][0]);
    }
    printf("}%s\n", i + 1 < NK ? "," : "");
  }
  printf(" ]\n}\n");
  return 0;
}
