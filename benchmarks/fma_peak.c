/* One CPU core's fp32 multiply-add peak and latency (benchmarks/README.md, History): the bound
   that a kernel's arithmetic could reach, to compare with what tinygrad's kernels reach.
   Needs clang (ext_vector_type):
   clang -O2 -march=native benchmarks/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
   An 8-float vector is one AVX2 register: the project's Zen 3 AMD EPYC has no AVX-512, and its
   two 8-wide FMA pipes give the roughly 115 GFLOP/s per core that benchmarks/README.md quotes
   (2 pipes x 8 floats x 2 operations x about 3.6 GHz). The empty asm statements keep each chain
   in a register ("+v"), so that the compiler computes all twelve. */
#include <stdio.h>
#include <time.h>

typedef float float8v __attribute__((ext_vector_type(8)));  /* one AVX2 register */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  float8v a[12], x = 1.0000001f, y = 0.9999999f;
  for (int i = 0; i < 12; i++) a[i] = i;
  long n = 200000000 / 12;
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {  /* 12 independent chains: throughput */
    double start = now();
    for (long j = 0; j < n; j++) {
      for (int i = 0; i < 12; i++) a[i] = a[i] * x + y;
      /* every chain's value is used, so the compiler keeps all 12 */
      __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]));
      __asm__ volatile("" : "+v"(a[6]), "+v"(a[7]), "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11]));
    }
    double took = now() - start;
    if (took < best) best = took;
  }
  double vector_fmas = (double)n * 12;
  printf("12 independent chains: %.1f GFLOP/s (%.2f ns per 8-float multiply-add)\n",
         2 * 8 * vector_fmas / best / 1e9, best / vector_fmas * 1e9);
  float8v c = 0;
  long m = 50000000;
  best = 1e9;
  for (int rep = 0; rep < 3; rep++) {  /* one dependent chain: latency */
    double start = now();
    for (long j = 0; j < m; j++) {
      c = c * x + y;
      __asm__ volatile("" : "+v"(c));
    }
    double took = now() - start;
    if (took < best) best = took;
  }
  printf("one dependent chain: %.2f ns per multiply-add (its latency)\n", best / m * 1e9);
  float sum = 0;  /* print a sum of every lane, so that no result is unused */
  for (int i = 0; i < 12; i++)
    for (int l = 0; l < 8; l++) sum += a[i][l];
  for (int l = 0; l < 8; l++) sum += c[l];
  printf("(checksum %g)\n", sum);
  return 0;
}
