/* One core's fp32 multiply-add peak and latency (README, Performance; notebook 06, appendix).
   clang -O2 -march=native benchmarks/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak */
#include <stdio.h>
#include <time.h>
typedef float f16v __attribute__((ext_vector_type(16)));
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  f16v a[12], x = 1.0000001f, y = 0.9999999f;
  for (int i=0;i<12;i++) a[i] = i;
  long N = 200000000/12;
  double best = 1e9;
  for (int rep=0; rep<5; rep++){
    double s = now();
    for (long n=0;n<N;n++){
      #pragma unroll
      for (int i=0;i<12;i++) a[i] = a[i]*x + y;
      __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]));
    }
    double e = now()-s; if (e<best) best=e;
  }
  double fmas = (double)N*12*16;
  printf("independent chains: %.1f GFLOP/s (%.2f ns per 16-wide FMA)\n", 2*fmas/best/1e9, best/(N*12)*1e9);
  float s=0; for(int i=0;i<12;i++) s+=a[i][0]; printf("%f\n", s);
  // one dependent chain
  f16v c = 0; best=1e9; long M = 50000000;
  for (int rep=0; rep<3; rep++){ double s0=now(); for(long n=0;n<M;n++){ c = c*x + y; __asm__ volatile("" : "+v"(c)); } double e=now()-s0; if(e<best)best=e; }
  printf("one chain: %.2f ns per FMA (latency)\n", best/M*1e9);
  printf("%f\n", c[0]);
}
