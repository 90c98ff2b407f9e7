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
  const uint32_t exponent = u & 0x7f800000u, fraction = u & 0x007fffffu;
  if (exponent == 0x7f800000u)
    u = fraction ? (u | 0x00400000u) : u;  // NaN: quiet; infinity as it is
  else if (exponent == 0)
    u &= 0x80000000u;  // zero or subnormal: a signed zero
  else
    u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even (may carry into infinity)
  return bf16{uint16_t(u >> 16)};
}

KOKKOS_INLINE_FUNCTION float to_float(bf16 x) {
  const uint32_t u = uint32_t(x.bits) << 16;
  float y = 0;
  memcpy(&y, &u, sizeof y);
  return y;
}

// A kernel's output element written as T or as bf16 (rounded), whichever its buffer holds.
template <class Out, class T>
KOKKOS_INLINE_FUNCTION Out stored_as(T x) {
  if constexpr (std::is_same_v<Out, bf16>)
    return to_bf16(float(x));
  else
    return Out(x);
}

}  // namespace strata::kernels
