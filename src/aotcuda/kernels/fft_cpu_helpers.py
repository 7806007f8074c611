"""The file-scope C++ helpers of ``aotcuda::fft_rows_cpu``'s kernels (kernels/fft_cpu_source.py writes the
kernels): the 8-row vector type and its loads and stores, the AVX2 8×8 transposes between rows and planes, the
per-thread planes (``Planes``) and the thread count a call runs on. Guarded, since AOTInductor puts every kernel
of a package into one source file.
"""

SCRATCH = r"""
#ifndef FFT_ROWS_CPU_HELPERS  // AOTInductor puts every kernel of a package into one source file
#define FFT_ROWS_CPU_HELPERS
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <stdexcept>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif
namespace aotcuda_fft {
// 8 floats, one row of the block each: GCC/Clang vector extensions, so that the butterflies are vector code
// under Inductor's -fno-tree-loop-vectorize (an AVX2 register where there is one, narrower code elsewhere).
typedef float vf8 __attribute__((vector_size(32)));
static inline vf8 ld(const float* p) { vf8 v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf8 v) { __builtin_memcpy(p, &v, sizeof v); }
// 16 floats: two points of the block's 8 rows where a stage's inner loop has them with one twiddle (a zmm
// register under AVX-512, which Inductor's build enables where the CPU has it).
typedef float vf16 __attribute__((vector_size(64)));
static inline void st(float* p, vf16 v) { __builtin_memcpy(p, &v, sizeof v); }
template <class T> static inline T ldv(const float* p) { T v; __builtin_memcpy(&v, p, sizeof v); return v; }
#if defined(__AVX2__)
// r[i] <- column i of the 8x8 matrix whose rows are r[0..7].
static inline void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20); r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20); r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31); r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31); r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
// plane[i][v] = rows[v][t0 + i], i < 8
static inline void load_real(const float* const* rows, int64_t t0, float* plane, float scale) {
  __m256 r[8]; const __m256 s = _mm256_set1_ps(scale);
  for (int v = 0; v < 8; ++v) r[v] = _mm256_loadu_ps(rows[v] + t0);
  transpose8(r);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(plane + 8 * i, _mm256_mul_ps(r[i], s));
}
// re[i][v], im[i][v] = the complex point t0 + i of row v (interleaved re, im)
static inline void load_pair(const float* const* rows, int64_t t0, float* re, float* im, float scale) {
  __m256 a[8], b[8];
  for (int v = 0; v < 8; ++v) {
    const __m256 lo = _mm256_loadu_ps(rows[v] + 2 * t0), hi = _mm256_loadu_ps(rows[v] + 2 * t0 + 8);
    a[v] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    b[v] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
  }
  transpose8(a); transpose8(b);
  const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i) { _mm256_storeu_ps(re + 8 * i, _mm256_mul_ps(a[i], s)); _mm256_storeu_ps(im + 8 * i, _mm256_mul_ps(b[i], s)); }
}
static inline void store_real(float* const* rows, int64_t t0, const float* plane, float scale) {
  __m256 r[8]; const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(plane + 8 * i);
  transpose8(r);
  for (int v = 0; v < 8; ++v) _mm256_storeu_ps(rows[v] + t0, _mm256_mul_ps(r[v], s));
}
static inline void store_pair(float* const* rows, int64_t t0, const float* re, const float* im, float scale) {
  __m256 a[8], b[8]; const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i) { a[i] = _mm256_loadu_ps(re + 8 * i); b[i] = _mm256_loadu_ps(im + 8 * i); }
  transpose8(a); transpose8(b);
  for (int v = 0; v < 8; ++v) {
    const __m256 x = _mm256_mul_ps(a[v], s), y = _mm256_mul_ps(b[v], s);
    const __m256 lo = _mm256_unpacklo_ps(x, y), hi = _mm256_unpackhi_ps(x, y);
    _mm256_storeu_ps(rows[v] + 2 * t0, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(rows[v] + 2 * t0 + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
}
// 8 complex points from t0 of the block's 8 rows: interleaved pairs where imag is null, else planes (re from
// rows, im from imag)
static inline void load_points(const float* const* rows, const float* const* imag, int64_t t0, float* re,
                               float* im, float scale) {
  if (imag) { load_real(rows, t0, re, scale); load_real(imag, t0, im, scale); } else load_pair(rows, t0, re, im, scale);
}
static inline void store_points(float* const* rows, float* const* imag, int64_t t0, const float* re,
                                const float* im) {
  if (imag) { store_real(rows, t0, re, 1.0f); store_real(imag, t0, im, 1.0f); } else store_pair(rows, t0, re, im, 1.0f);
}
#endif
// 4·`floats` floats for one thread (four planes, or four and the four-step split's four small ones). Up to
// KEPT_BYTES they are kept between calls (a fresh allocation each call would come back from the OS and be
// faulted in again: docs/performance.md); larger ones (m of 16384 and more) live for one call, so that a
// long transform does not leave 8 MiB on every OpenMP thread for the life of the process. p is null where
// the allocation failed.
struct Planes {
  static constexpr int64_t KEPT_BYTES = 2 << 20;
  float* p = nullptr;
  bool owned = false;
  explicit Planes(int64_t floats) {
    const int64_t bytes = ((floats * 4 + 15) / 16) * 16 * static_cast<int64_t>(sizeof(float));
    if (bytes > KEPT_BYTES) {
      p = static_cast<float*>(std::aligned_alloc(64, bytes));
      owned = true;
      if (p) std::memset(p, 0, bytes);
      return;
    }
    static thread_local float* kept = nullptr;
    static thread_local int64_t have = 0;
    if (have < bytes) {
      std::free(kept);
      kept = static_cast<float*>(std::aligned_alloc(64, bytes));
      have = kept ? bytes : 0;
      if (kept) std::memset(kept, 0, bytes);
    }
    p = kept;
  }
  ~Planes() { if (owned) std::free(p); }
  Planes(const Planes&) = delete;
  Planes& operator=(const Planes&) = delete;
};
// The threads a call of `blocks` blocks runs on: OpenMP's current count (torch.set_num_threads sets it) but
// no more than there are blocks, so that no idle thread builds Planes (up to 8 MiB, allocated and zeroed
// each call past KEPT_BYTES) for no work.
static inline int threads_for(int64_t blocks) {
#ifdef _OPENMP
  const int most = omp_get_max_threads();
  return blocks < most ? static_cast<int>(blocks) : most;
#else
  (void)blocks;
  return 1;
#endif
}
}  // namespace aotcuda_fft
#endif
"""
