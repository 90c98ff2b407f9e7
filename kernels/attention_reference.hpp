#pragma once
// The stored-probabilities causal attention strata ran before the fused kernel
// (kernels/attention.hpp): S = Q K^T per batch row and head, P = causal_softmax(S /
// sqrt(hs)) kept whole, (B*H, T, T), for the backward, Y = P V. The model no longer uses
// it: it is the tests' reference for the fused kernel and the benchmarks' baseline.
// The products skip the masked blocks (causal_scores and friends) and run in the given
// precision (bf16: operands rounded as they enter a product, fp32 sums).
// qkv is (B*T, 3C) with columns [q | k | v], each C = H*hs wide, head-major inside.
#include <algorithm>

#include "kernels/head_matrices.hpp"
#include "kernels/products.hpp"
#include "kernels/softmax_causal.hpp"

namespace strata::kernels {

// The attention probabilities of one call, kept for the backward: (B*H, T, T).
template <class T>
struct AttentionBuffers {
  Tensor3<T> att;
  AttentionBuffers() = default;
  AttentionBuffers(int64_t b, int64_t t, int64_t h) : att("att.p", b * h, t, t) {}
};

// The (T, T) matrices of a (B*H, T, T) tensor.
template <class T>
HeadMatrices<T> score_matrices(T* scores, int64_t t, int64_t h) {
  return {scores, t, h * t * t, t * t};
}

// The products with the (T, T) score matrices skip their masked upper triangle: rows go
// in blocks of `block`, and block [r0, r1) meets keys [0, r1) only. The block trades the
// flops skipped, (1 + block / T) / 2 of the square's are done, against smaller GEMMs.
inline int64_t causal_block_rows(int64_t t) { return t <= 512 ? 64 : 128; }

// s = x y^T for x, y (T, hs) per head, on and below the diagonal blocks; the entries
// right of each row block's last key are not written.
template <class T>
void causal_scores(ProductPrecision precision, HeadMatrices<const T> x, HeadMatrices<const T> y, HeadMatrices<T> s,
                   int64_t b, int64_t h, int64_t t, int64_t hs, int64_t block) {
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t r0 = 0; r0 < t; r0 += block) {
      const int64_t r1 = std::min(t, r0 + block);
      product_strided_batched<T>(precision, 'N', 'T', r1 - r0, r1, hs, x.at(bb, r0), x.ld, x.head_stride, y.at(bb, 0),
                                 y.ld, y.head_stride, T(0), s.at(bb, r0), s.ld, s.head_stride, h);
    }
}

// z = p w per head, for p (T, T) zero above the diagonal (read on and below the diagonal
// blocks only) and w (T, hs).
template <class T>
void causal_times(ProductPrecision precision, HeadMatrices<const T> p, HeadMatrices<const T> w, HeadMatrices<T> z,
                  int64_t b, int64_t h, int64_t t, int64_t hs, int64_t block) {
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t r0 = 0; r0 < t; r0 += block) {
      const int64_t r1 = std::min(t, r0 + block);
      product_strided_batched<T>(precision, 'N', 'N', r1 - r0, hs, r1, p.at(bb, r0), p.ld, p.head_stride, w.at(bb, 0),
                                 w.ld, w.head_stride, T(0), z.at(bb, r0), z.ld, z.head_stride, h);
    }
}

// z = p^T w per head, p as in causal_times: its column block [c0, c1) is zero above row c0.
template <class T>
void causal_transposed_times(ProductPrecision precision, HeadMatrices<const T> p, HeadMatrices<const T> w,
                             HeadMatrices<T> z, int64_t b, int64_t h, int64_t t, int64_t hs, int64_t block) {
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t c0 = 0; c0 < t; c0 += block) {
      const int64_t c1 = std::min(t, c0 + block);
      product_strided_batched<T>(precision, 'T', 'N', c1 - c0, hs, t - c0, p.at(bb, c0, c0), p.ld, p.head_stride,
                                 w.at(bb, c0), w.ld, w.head_stride, T(0), z.at(bb, c0), z.ld, z.head_stride, h);
    }
}

// buf = the attention probabilities P = causal_softmax(Q K^T / sqrt(hs)) of qkv (B*T, 3C),
// whose columns are [q | k | v], each C = H*hs wide and head-major inside.
template <class T>
void attention_probabilities(AttentionBuffers<T>& buf, V2<const T> qkv, int64_t b, int64_t t, int64_t h,
                             ProductPrecision precision = Precision::FP32) {
  const int64_t c = qkv.extent(1) / 3, hs = c / h, block = causal_block_rows(t);
  const auto part = [&](int64_t i) { return head_columns<const T>(qkv.data(), t, 3 * c, i * c, hs); };
  causal_scores<T>(precision, part(0), part(1), score_matrices(buf.att.data(), t, h), b, h, t, hs, block);  // S
  softmax_causal_forward<T>(buf.att, T(1) / kmath::sqrt(T(hs)), block);                                     // P
}

// out (B*T, C) = causal attention of qkv (B*T, 3C). buf keeps the probabilities P.
template <class T>
void reference_attention_forward(V2<T> out, AttentionBuffers<T>& buf, V2<const T> qkv, int64_t b, int64_t t, int64_t h,
                                 ProductPrecision precision = Precision::FP32) {
  const int64_t c = out.extent(1), hs = c / h, block = causal_block_rows(t);
  attention_probabilities<T>(buf, qkv, b, t, h, precision);
  const auto v = head_columns<const T>(qkv.data(), t, 3 * c, 2 * c, hs);
  const HeadMatrices<const T> p = score_matrices<const T>(buf.att.data(), t, h);
  causal_times<T>(precision, p, v, head_columns(out.data(), t, c, 0, hs), b, h, t, hs, block);  // Y = P V
}

// dout (B*T, C) -> dqkv (B*T, 3C), with the qkv and P of the forward.
template <class T>
void reference_attention_backward(V2<T> dqkv, const AttentionBuffers<T>& buf, V2<const T> qkv, V2<const T> dout,
                                  int64_t b, int64_t t, int64_t h, ProductPrecision precision = Precision::FP32) {
  const int64_t c = dout.extent(1), hs = c / h, block = causal_block_rows(t);
  const auto part = [&](int64_t i) { return head_columns<const T>(qkv.data(), t, 3 * c, i * c, hs); };
  const auto dpart = [&](int64_t i) { return head_columns<T>(dqkv.data(), t, 3 * c, i * c, hs); };
  const HeadMatrices<const T> dy = head_columns<const T>(dout.data(), t, c, 0, hs);
  const HeadMatrices<const T> p = score_matrices<const T>(buf.att.data(), t, h);
  Tensor3<T> datt(Kokkos::view_alloc(Kokkos::WithoutInitializing, "att.dp"), b * h, t, t);
  const HeadMatrices<T> ds = score_matrices(datt.data(), t, h);
  causal_scores<T>(precision, dy, part(2), ds, b, h, t, hs, block);                            // dP = dY V^T
  causal_transposed_times<T>(precision, p, dy, dpart(2), b, h, t, hs, block);                  // dV = P^T dY
  softmax_causal_backward<T>(datt, buf.att, T(1) / kmath::sqrt(T(hs)), block);                 // dS
  causal_times<T>(precision, as_const(ds), part(1), dpart(0), b, h, t, hs, block);             // dQ = dS K
  causal_transposed_times<T>(precision, as_const(ds), part(0), dpart(1), b, h, t, hs, block);  // dK = dS^T Q
}

}  // namespace strata::kernels
