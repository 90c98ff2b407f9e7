#pragma once
// Causal softmax over attention scores: row t of each (T, T) matrix is normalised over
// columns 0..t; columns after t (the future) are set to 0.
#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/fast_exp.hpp"

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
        T mx = row[0] * scale;
        for (int64_t j = 1; j <= t; ++j) mx = row[j] * scale > mx ? row[j] * scale : mx;
        for (int64_t j = 0; j <= t; ++j) row[j] = fast_exp(row[j] * scale - mx);  // vectorises
        T sum = 0;
        for (int64_t j = 0; j <= t; ++j) sum += row[j];
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
        T dot = 0;
        for (int64_t j = 0; j <= t; ++j) dot += p[j] * d[j];
        for (int64_t j = 0; j <= t; ++j) d[j] = scale * p[j] * (d[j] - dot);
        for (int64_t j = t + 1, end = causal_zero_end(t, t_len, blk); j < end; ++j) d[j] = T(0);
      });
}

}  // namespace strata::kernels
