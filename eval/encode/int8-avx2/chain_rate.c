// Issue rate of the int8 kernels' instruction chains per 32-bit lane (sign + maddubs + madd + add: 32
// multiply-adds per ymm; madd + add: 16; one FMA: 8), 8 independent accumulators, in G chains/s.
//   gcc -O2 -mavx2 -mfma eval/encode/int8-avx2/chain_rate.c -o /tmp/chain_rate && /tmp/chain_rate
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 100000000L
int main(){
  volatile int seed=1;
  __m256i b[8]; __m256i one=_mm256_set1_epi16(1); __m256i xu=_mm256_set1_epi8(seed), wb=_mm256_set1_epi8(2);
  for(int i=0;i<8;i++)b[i]=_mm256_set1_epi32(i);
  for(int rep=0;rep<2;rep++){
  double t=now();
  for(long i=0;i<N/8;i++){ for(int k=0;k<8;k++) b[k]=_mm256_add_epi32(b[k],_mm256_madd_epi16(_mm256_maddubs_epi16(xu,wb),one)); xu=_mm256_add_epi8(xu,wb);}
  double tu=now()-t;
  printf("maddubs+madd+add ymm: %.3f G/s\n", N/tu/1e9);
  t=now();
  for(long i=0;i<N/8;i++){ for(int k=0;k<8;k++) b[k]=_mm256_add_epi32(b[k],_mm256_madd_epi16(_mm256_maddubs_epi16(xu,_mm256_sign_epi8(wb,xu)),one)); xu=_mm256_add_epi8(xu,wb);}
  tu=now()-t;
  printf("sign+maddubs+madd+add ymm: %.3f G/s\n", N/tu/1e9);
  __m256i xi=_mm256_set1_epi16(seed), wi=_mm256_set1_epi16(3);
  t=now();
  for(long i=0;i<N/8;i++){ for(int k=0;k<8;k++) b[k]=_mm256_add_epi32(b[k],_mm256_madd_epi16(xi,wi)); xi=_mm256_add_epi16(xi,wi);}
  double tm=now()-t;
  printf("madd+add ymm: %.3f G/s\n", N/tm/1e9);
  __m256 a[8]; __m256 x=_mm256_set1_ps(1.0f*seed), y=_mm256_set1_ps(0.0f);
  for(int i=0;i<8;i++)a[i]=_mm256_set1_ps(i);
  t=now();
  for(long i=0;i<N/8;i++){ for(int k=0;k<8;k++) a[k]=_mm256_fmadd_ps(a[k],x,y);}
  double tf=now()-t; float s=0; for(int i=0;i<8;i++)s+=a[i][0];
  printf("fma ymm: %.3f G/s (%f)\n", N/tf/1e9, s);
  }
  int z=0; for(int i=0;i<8;i++) z+=_mm256_extract_epi32(b[i],0); printf("%d\n",z);
}
