#pragma once
// bf16 values in memory, and the rounding that makes them: what the bf16 products round
// their fp32 operands with (kernels/matmul_bf16), so that a kernel writing its output
// rounded gives the product exactly the operand the product would have rounded itself.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/kmath.hpp"

namespace strata::kernels {

// A bf16 value: the upper 16 bits of the float it stands for.
struct bf16 {
  uint16_t bits = 0;
};

// x rounded to bf16 as oneDNN's reorder rounds it on CPUs with AVX512-BF16 or AMX (the
// instruction VCVTNEPS2BF16): to nearest, ties to even; infinities kept; a NaN stays a
// NaN (made quiet); subnormal inputs become a zero of their sign.
KOKKOS_INLINE_FUNCTION bf16 to_bf16(float x) {
  uint32_t u = 0;
  memcpy(&u, &x, sizeof u);
  // selects, not branches, so that loops over it vectorise
  const uint32_t magnitude = u & 0x7fffffffu;
  const uint32_t nearest = u + 0x7fffu + ((u >> 16) & 1u);  // ties to even; infinity stays, a carry may make one
  const uint32_t quiet_nan = u | 0x00400000u;
  const uint32_t signed_zero = u & 0x80000000u;  // for zeros and subnormals
  const uint32_t r = magnitude > 0x7f800000u ? quiet_nan : (magnitude < 0x00800000u ? signed_zero : nearest);
  return bf16{uint16_t(r >> 16)};
}

KOKKOS_INLINE_FUNCTION float to_float(bf16 x) {
  const uint32_t u = uint32_t(x.bits) << 16;
  float y = 0;
  memcpy(&y, &u, sizeof y);
  return y;
}

// dst = src rounded to bf16 (to_bf16's bits), a block of rows x cols, rows ld_src and
// ld_dst apart, in host memory: with the CPU's own conversion where it has one
// (AVX512-BF16: 16 values an instruction, where to_bf16 in a vectorised loop takes a few
// integer operations per 8), else to_bf16.
void round_rows_to_bf16(const float* src, int64_t ld_src, bf16* dst, int64_t ld_dst, int64_t rows, int64_t cols);
// The same, its rows shared among the rank's threads (called outside parallel regions: a
// product's operand, which MoE's experts round before each product); the same bits.
void round_rows_to_bf16_threaded(const float* src, int64_t ld_src, bf16* dst, int64_t ld_dst, int64_t rows,
                                 int64_t cols);

// A kernel's output element written as T or as bf16 (rounded), whichever its buffer holds.
template <class Out, class T>
KOKKOS_INLINE_FUNCTION Out stored_as(T x) {
  if constexpr (std::is_same_v<Out, bf16>)
    return to_bf16(float(x));
  else
    return Out(x);
}

}  // namespace strata::kernels
