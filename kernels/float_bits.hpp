#pragma once
// A float's bits as an integer, and as an integer that orders as the floats do, for
// clamps and maxima done with integer (vectorisable, branch-free) operations.
#include <cstdint>
#include <cstring>

#include "core/kmath.hpp"

namespace strata::kernels {

template <class T>
struct FloatBits;
template <>
struct FloatBits<float> {
  using Int = int32_t;
};
template <>
struct FloatBits<double> {
  using Int = int64_t;
};

template <class T>
KOKKOS_INLINE_FUNCTION typename FloatBits<T>::Int bits_of(T x) {
  typename FloatBits<T>::Int b;
  memcpy(&b, &x, sizeof b);  // a bit cast the vectoriser understands
  return b;
}

template <class T>
KOKKOS_INLINE_FUNCTION T from_bits(typename FloatBits<T>::Int b) {
  T x;
  memcpy(&x, &b, sizeof x);
  return x;
}

// Negative floats are sign and magnitude: flipping their magnitude bits makes the signed
// integers order as the floats do (-0 just below +0, NaNs beyond the infinities). The map
// is its own inverse.
template <class I>
KOKKOS_INLINE_FUNCTION I flip_negative(I b) {
  constexpr I magnitude = ~(I(1) << (8 * sizeof(I) - 1));
  return b ^ ((b >> (8 * sizeof(I) - 1)) & magnitude);
}

template <class T>
KOKKOS_INLINE_FUNCTION typename FloatBits<T>::Int ordered_bits(T x) {
  return flip_negative(bits_of(x));
}

template <class T>
KOKKOS_INLINE_FUNCTION T from_ordered_bits(typename FloatBits<T>::Int k) {
  return from_bits<T>(flip_negative(k));
}

}  // namespace strata::kernels
