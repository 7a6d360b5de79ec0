// The matrix product of a decode step of a few sequences, on the CPU: the bench's F32 model's weight
// matrices (8 layers of 4 × 512×512, 2 × 1536×512 and 512×1536; 109 MB) times 2 to 6 columns, three ways:
//   one    one column, a row at a time (ggml's vec_dot path: a lone sequence's step), for scale;
//   tiles  4 rows × N columns at a time (llamafile's tinyBLAS `gemm_bloc<4, N>`, what llama.cpp uses);
//   rows   1 row × N columns at a time (resources/engine-patches/sgemm-few-columns.patch).
// Weights in 4 KiB pages and in huge pages (the server reads the weights into huge pages on Linux).
// docs/performance.md, section 21. Not part of `npm test`. x86 with AVX2 and FMA (AVX-512 where built for it):
//   gcc -O3 -march=native -o /tmp/few-columns bench/few-columns.c && /tmp/few-columns
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#ifdef __AVX512F__
typedef __m512 V;
#define W 16
#define load(p) _mm512_loadu_ps(p)
#define madd(a, b, c) _mm512_fmadd_ps(a, b, c)
#define zero() _mm512_setzero_ps()
static inline float hsum(V v) { return _mm512_reduce_add_ps(v); }
#else
typedef __m256 V;
#define W 8
#define load(p) _mm256_loadu_ps(p)
#define madd(a, b, c) _mm256_fmadd_ps(a, b, c)
#define zero() _mm256_setzero_ps()
static inline float hsum(V v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
#endif

typedef struct { int m, k; const float *A; } Mat;
enum { LAYERS = 8, PER_LAYER = 7, MATS = LAYERS * PER_LAYER, MAXN = 6 };
static Mat mats[MATS];
static float B[MAXN][1536] __attribute__((aligned(64)));
float C[MAXN][1536]; // not static: read by the checksum, so the compiler keeps the work

static void one(const Mat *M) {
  for (int r = 0; r < M->m; r++) {
    const float *a = M->A + (size_t)M->k * r;
    V s0 = zero(), s1 = zero();
    for (int l = 0; l < M->k; l += 2 * W) {
      s0 = madd(load(a + l), load(B[0] + l), s0);
      s1 = madd(load(a + l + W), load(B[0] + l + W), s1);
    }
    C[0][r] = hsum(s0) + hsum(s1);
  }
}

#define TILES(N)                                                                           \
  static void tiles##N(const Mat *M) {                                                     \
    for (int ii = 0; ii < M->m; ii += 4) {                                                 \
      V c[N][4];                                                                           \
      for (int j = 0; j < N; j++)                                                          \
        for (int i = 0; i < 4; i++) c[j][i] = zero();                                      \
      for (int l = 0; l < M->k; l += W) {                                                  \
        V a[4];                                                                            \
        for (int i = 0; i < 4; i++) a[i] = load(M->A + (size_t)M->k * (ii + i) + l);       \
        for (int j = 0; j < N; j++) {                                                      \
          V b = load(B[j] + l);                                                            \
          for (int i = 0; i < 4; i++) c[j][i] = madd(a[i], b, c[j][i]);                    \
        }                                                                                  \
      }                                                                                    \
      for (int j = 0; j < N; j++)                                                          \
        for (int i = 0; i < 4; i++) C[j][ii + i] = hsum(c[j][i]);                          \
    }                                                                                      \
  }
#define ROWS(N)                                                                            \
  static void rows##N(const Mat *M) {                                                      \
    for (int r = 0; r < M->m; r++) {                                                       \
      const float *a = M->A + (size_t)M->k * r;                                            \
      V c[N];                                                                              \
      for (int j = 0; j < N; j++) c[j] = zero();                                           \
      for (int l = 0; l < M->k; l += W) {                                                  \
        V x = load(a + l);                                                                 \
        for (int j = 0; j < N; j++) c[j] = madd(x, load(B[j] + l), c[j]);                 \
      }                                                                                    \
      for (int j = 0; j < N; j++) C[j][r] = hsum(c[j]);                                    \
    }                                                                                      \
  }
TILES(2) TILES(3) TILES(4) TILES(6)
ROWS(2) ROWS(3) ROWS(4) ROWS(6)

typedef void (*Kernel)(const Mat *);
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
/** Best of 15 passes over every matrix, in ms. */
static double timeIt(Kernel kernel) {
  double best = 1e9;
  for (int it = 0; it < 15; it++) {
    double t0 = now();
    for (int i = 0; i < MATS; i++) kernel(&mats[i]);
    double t = now() - t0;
    if (t < best) best = t;
  }
  return best;
}

int main(void) {
  const int dims[PER_LAYER][2] = {{512, 512}, {512, 512}, {512, 512}, {512, 512}, {1536, 512}, {1536, 512}, {512, 1536}};
  size_t total = 0;
  for (int t = 0; t < PER_LAYER; t++) total += (size_t)dims[t][0] * dims[t][1] * LAYERS;
  const size_t bytes = total * sizeof(float), huge = 2u << 20;
  for (int j = 0; j < MAXN; j++)
    for (int i = 0; i < 1536; i++) B[j][i] = 0.5f + j;
  printf("%.1f MB of F32 weights, %d-float vectors; ms per pass over all of them (best of 15), rounds alternated\n", bytes / 1e6, W);
  const int ns[] = {2, 3, 4, 6};
  const Kernel tiles[] = {tiles2, tiles3, tiles4, tiles6}, rows[] = {rows2, rows3, rows4, rows6};
  for (int pass = 0; pass < 2; pass++) {
    for (int pages = 0; pages < 2; pages++) {
      char *raw = mmap(0, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) return 1;
      float *base = (float *)(((size_t)raw + huge - 1) & ~(huge - 1));
      madvise(base, bytes, pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
      size_t off = 0;
      for (int L = 0; L < LAYERS; L++)
        for (int t = 0; t < PER_LAYER; t++) {
          mats[L * PER_LAYER + t] = (Mat){dims[t][0], dims[t][1], base + off};
          off += (size_t)dims[t][0] * dims[t][1];
        }
      for (size_t i = 0; i < total; i++) base[i] = (float)(i % 97) * 0.001f;
      printf("%s pages: one column %.2f", pages ? "huge" : "4 KiB", timeIt(one));
      for (int i = 0; i < 4; i++) {
        const double t = timeIt(tiles[i]), r = timeIt(rows[i]);
        printf(" | %d columns: tiles %.2f, rows %.2f (%.2fx)", ns[i], t, r, t / r);
      }
      printf(" ");
      double sum = 0;
      for (int j = 0; j < MAXN; j++)
        for (int i = 0; i < 1536; i++) sum += C[j][i];
      printf("(checksum %.3g)\n", sum);
      munmap(raw, bytes + huge);
    }
  }
  return 0;
}
