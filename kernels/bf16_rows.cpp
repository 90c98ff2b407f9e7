#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>

#include "kernels/bf16.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace strata::kernels {
namespace {

void round_rows_portable(const float* src, int64_t ld_src, bf16* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * ld_src;
    bf16* d = dst + r * ld_dst;
    for (int64_t j = 0; j < cols; ++j) d[j] = to_bf16(s[j]);
  }
}

#if defined(__x86_64__)
bool cpu_converts_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false;
  const bool avx512bw = (b >> 30) & 1u, avx512vl = (b >> 31) & 1u;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return ((a >> 5) & 1u) && avx512bw && avx512vl;  // AVX512-BF16
}

// VCVTNEPS2BF16, 16 values an instruction: the conversion oneDNN's reorder uses.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_rows_native(const float* src, int64_t ld_src,
                                                                                       bf16* dst, int64_t ld_dst,
                                                                                       int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * ld_src;
    auto* d = reinterpret_cast<uint16_t*>(dst + r * ld_dst);
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j)));
    if (j < cols) {
      const __mmask16 m = __mmask16((1u << (cols - j)) - 1u);
      _mm256_mask_storeu_epi16(d + j, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + j)));
    }
  }
}
#endif

}  // namespace

void round_rows_to_bf16(const float* src, int64_t ld_src, bf16* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
#if defined(__x86_64__)
  static const bool native = cpu_converts_bf16();
  if (native) return round_rows_native(src, ld_src, dst, ld_dst, rows, cols);
#endif
  round_rows_portable(src, ld_src, dst, ld_dst, rows, cols);
}

void round_rows_to_bf16_threaded(const float* src, int64_t ld_src, bf16* dst, int64_t ld_dst, int64_t rows,
                                 int64_t cols) {
  constexpr int64_t kRowsPerChunk = 32;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  Kokkos::parallel_for("round_rows_to_bf16", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, chunks),
                       [=](const int64_t c) {
                         const int64_t r0 = c * kRowsPerChunk, n = std::min(kRowsPerChunk, rows - r0);
                         round_rows_to_bf16(src + r0 * ld_src, ld_src, dst + r0 * ld_dst, ld_dst, n, cols);
                       });
}

}  // namespace strata::kernels
