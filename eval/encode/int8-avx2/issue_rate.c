// Issue rate of single AVX2 ops (FMA, vpmaddwd, vpmaddubsw) in 12 independent chains, in G ops/s.
//   gcc -O2 -mavx2 -mfma eval/encode/int8-avx2/issue_rate.c -o /tmp/issue_rate && /tmp/issue_rate
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 200000000L
#define K 12
int main(){
  volatile int seed=1;
  __m256 a[K]; __m256 x=_mm256_set1_ps(1.0f*seed), y=_mm256_set1_ps(0.0f);
  __m256i b[K]; __m256i xi=_mm256_set1_epi16(seed), wi=_mm256_set1_epi16(3), one=_mm256_set1_epi16(1);
  for(int rep=0;rep<3;rep++){
  for(int i=0;i<K;i++)a[i]=_mm256_set1_ps(i);
  double t=now();
  for(long i=0;i<N/K;i++){ for(int k=0;k<K;k++) a[k]=_mm256_fmadd_ps(a[k],x,y);}
  double tf=now()-t; float s=0; for(int i=0;i<K;i++)s+=a[i][0];
  for(int i=0;i<K;i++)b[i]=_mm256_set1_epi32(i);
  t=now();
  for(long i=0;i<N/K;i++){ for(int k=0;k<K;k++) b[k]=_mm256_madd_epi16(b[k],wi);}
  double tm=now()-t;
  t=now();
  for(long i=0;i<N/K;i++){ for(int k=0;k<K;k++) b[k]=_mm256_maddubs_epi16(b[k],wi);}
  double tu=now()-t;
  printf("per ymm op G/s: fma %.3f  madd %.3f  maddubs %.3f (%f)\n", N/tf/1e9, N/tm/1e9, N/tu/1e9, s);
  }
  int z=0; for(int i=0;i<K;i++) z+=_mm256_extract_epi32(b[i],0); printf("%d\n",z);
}
