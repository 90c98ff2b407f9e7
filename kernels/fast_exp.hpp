#pragma once
// exp for the elementwise kernels (GELU, softmax, cross-entropy). libm's expf is a call
// the compiler cannot vectorise; this float version is branch-free arithmetic that it
// can, with a relative error below 3e-7 (a few ulp) over the whole float range. Double
// precision (used by the gradient checks) keeps the exact library exp.
//
// The argument is clamped to [-87, 88] (so 2^n stays a normal float) with integer
// operations on the float's bits, not float compares: GCC vectorises a float compare
// inside a loop only under -fno-trapping-math, and then as a slow chain of blends, so a
// float clamp slowed every kernel that calls this (GELU forward and backward took 9.5 ms
// per (2048 x 1536) on one core, 4.8 ms with this form). A NaN argument gives NaN.
#include <cstdint>

#include "core/kmath.hpp"
#include "kernels/float_bits.hpp"

namespace strata::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION T fast_exp(T x) {
  return kmath::exp(x);
}

template <>
KOKKOS_INLINE_FUNCTION float fast_exp<float>(float x0) {
  const int32_t lo = ordered_bits(-87.0f), hi = ordered_bits(88.0f);
  int32_t k = ordered_bits(x0);
  k = k < lo ? lo : k;
  k = k > hi ? hi : k;
  const float x = from_ordered_bits<float>(k);
  // exp(x) = 2^n * exp(r), n = round(x / ln2) (by the 1.5 * 2^23 trick: exact for
  // |x / ln2| < 2^22), r = x - n ln2 in [-ln2/2, ln2/2]
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;  // ln2 split in a short high part ...
  r = r - n * -2.12194440e-4f;     // ... and the rest (Cody-Waite)
  // exp(r) by its degree-6 Taylor polynomial (|r| <= 0.347: truncation < 2e-8)
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n by building the float's exponent field (n in [-126, 127] after the clamp)
  const float scale = from_bits<float>((int32_t(n) + 127) << 23);
  const int32_t is_nan = -int32_t((bits_of(x0) & 0x7FFFFFFF) > 0x7F800000);  // all ones for NaN
  return from_bits<float>(bits_of(p * scale) | (is_nan & 0x7FC00000));
}

}  // namespace strata::kernels
