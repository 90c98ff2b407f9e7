#pragma once
// Reductions along a row that the compiler vectorises. A single running float sum is a
// chain of additions the compiler may not reorder (that would change the rounding), so a
// loop that accumulates into one variable stays scalar, and with it everything the loop
// computes (an exp per term, say). kLanes independent partial sums, added at the end, are
// one or two vector registers: the loop vectorises, and the order is still fixed (the
// same result on every run; it differs from the sequential sum by rounding only).
// The maximum works on the floats' bits as ordered integers (kernels/float_bits.hpp):
// a float compare in a loop is if-converted into a slow blend chain, an integer one is a
// single vector max. A NaN does not always win it (one with the sign bit set, as x86
// makes for 0 * inf, orders below -inf); the kernels' sums that follow carry it instead.
#include <cstdint>

#include "core/kmath.hpp"
#include "kernels/float_bits.hpp"

namespace strata::kernels {

constexpr int kLanes = 16;

// sum over j in [0, n) of term(j), in kLanes interleaved partial sums
template <class T, class Term>
KOKKOS_INLINE_FUNCTION T lane_sum(int64_t n, const Term& term) {
  T acc[kLanes] = {};
  int64_t j = 0;
  for (; j <= n - kLanes; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  T sum = 0;
  for (; j < n; ++j) sum += term(j);
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

// max over j in [0, n) of value(j), n >= 1
template <class T, class Value>
KOKKOS_INLINE_FUNCTION T lane_max(int64_t n, const Value& value) {
  using I = typename FloatBits<T>::Int;
  I acc[kLanes];
  const I first = ordered_bits(value(0));
  for (int l = 0; l < kLanes; ++l) acc[l] = first;
  int64_t j = 0;
  for (; j <= n - kLanes; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const I v = ordered_bits(value(j + l));
      acc[l] = v > acc[l] ? v : acc[l];
    }
  I m = first;
  for (; j < n; ++j) {
    const I v = ordered_bits(value(j));
    m = v > m ? v : m;
  }
  for (int l = 0; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return from_ordered_bits<T>(m);
}

}  // namespace strata::kernels
