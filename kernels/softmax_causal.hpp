#pragma once
// Causal softmax over attention scores: row t of each (T, T) matrix is normalised over
// columns 0..t; columns after t (the future) are set to 0.
#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/fast_exp.hpp"
#include "kernels/lanes.hpp"

namespace strata::kernels {

// The future is zeroed up to the end of the row's block of `block` rows (default: the
// whole row): the causal products (attention.hpp) read no further, and skip writing it.
KOKKOS_INLINE_FUNCTION int64_t causal_zero_end(int64_t t, int64_t t_len, int64_t block) {
  const int64_t end = (t / block + 1) * block;
  return end < t_len ? end : t_len;
}

// att is (N, T, T), scores in, probabilities out (in place). scale multiplies the scores.
template <class T>
void softmax_causal_forward(V3<T> att, T scale, int64_t block = 0) {
  const int64_t n = att.extent(0), t_len = att.extent(1), blk = block > 0 ? block : t_len;
  Kokkos::parallel_for(
      "softmax_causal_forward", Range(0, n * t_len), KOKKOS_LAMBDA(const int64_t r) {
        const int64_t b = r / t_len, t = r % t_len;
        T* row = &att(b, t, 0);
        // scale > 0, so the largest scaled score is the largest score, scaled
        const T mx = lane_max<T>(t + 1, [&](int64_t j) { return row[j]; }) * scale;
        const T sum = lane_sum<T>(t + 1, [&](int64_t j) { return row[j] = fast_exp(row[j] * scale - mx); });
        const T inv = T(1) / sum;
        for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
        for (int64_t j = t + 1, end = causal_zero_end(t, t_len, blk); j < end; ++j) row[j] = T(0);
      });
}

// Given the probabilities p = att and datt = dL/dp, writes dL/dscores into datt (in
// place), including the scale: ds = scale * p * (dp - sum_j p_j dp_j), 0 above the
// diagonal (up to the block's end, as in the forward).
template <class T>
void softmax_causal_backward(V3<T> datt, V3<const T> att, T scale, int64_t block = 0) {
  const int64_t n = att.extent(0), t_len = att.extent(1), blk = block > 0 ? block : t_len;
  Kokkos::parallel_for(
      "softmax_causal_backward", Range(0, n * t_len), KOKKOS_LAMBDA(const int64_t r) {
        const int64_t b = r / t_len, t = r % t_len;
        const T* p = &att(b, t, 0);
        T* d = &datt(b, t, 0);
        const T dot = lane_sum<T>(t + 1, [&](int64_t j) { return p[j] * d[j]; });
        for (int64_t j = 0; j <= t; ++j) d[j] = scale * p[j] * (d[j] - dot);
        for (int64_t j = t + 1, end = causal_zero_end(t, t_len, blk); j < end; ++j) d[j] = T(0);
      });
}

}  // namespace strata::kernels
