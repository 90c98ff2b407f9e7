#pragma once
// Causal multi-head self-attention on a packed qkv activation, as batched gemms:
//   S = Q K^T (per batch row and head), P = causal_softmax(S / sqrt(hs)), Y = P V,
// computed on and below the diagonal blocks only (causal_scores and friends).
// qkv is (B*T, 3C) with columns [q | k | v], each C = H*hs wide, head-major inside.
#include <algorithm>

#include "kernels/gemm.hpp"
#include "kernels/softmax_causal.hpp"

namespace strata::kernels {

// Scratch and saved state of one attention call; sizes follow (B, T, H, hs).
template <class T>
struct AttentionBuffers {
  Tensor3<T> q, k, v;  // (B*H, T, hs) each, heads made contiguous
  Tensor3<T> att;      // (B*H, T, T) softmax probabilities, kept for the backward
  Tensor3<T> y;        // (B*H, T, hs) per-head outputs, reused for gradients
  AttentionBuffers() = default;
  AttentionBuffers(int64_t b, int64_t t, int64_t h, int64_t hs)
      : q("att.q", b * h, t, hs), k("att.k", b * h, t, hs), v("att.v", b * h, t, hs),
        att("att.p", b * h, t, t), y("att.y", b * h, t, hs) {}
};

// (B*T, 3C) packed -> q, k, v (B*H, T, hs).
template <class T>
void attention_split_heads(V3<T> q, V3<T> k, V3<T> v, V2<const T> qkv, int64_t b, int64_t t, int64_t h) {
  const int64_t hs = q.extent(2), c = h * hs;
  Kokkos::parallel_for(
      "attention_split_heads", Range(0, b * t), KOKKOS_LAMBDA(const int64_t bt) {
        const int64_t bb = bt / t, tt = bt % t;
        const T* src = &qkv(bt, 0);
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t d = 0; d < hs; ++d) {
            q(bb * h + hh, tt, d) = src[hh * hs + d];
            k(bb * h + hh, tt, d) = src[c + hh * hs + d];
            v(bb * h + hh, tt, d) = src[2 * c + hh * hs + d];
          }
      });
}

// Inverse of attention_split_heads for gradients: dq, dk, dv -> dqkv (B*T, 3C).
template <class T>
void attention_merge_heads_qkv(V2<T> dqkv, V3<const T> dq, V3<const T> dk, V3<const T> dv, int64_t b, int64_t t,
                               int64_t h) {
  const int64_t hs = dq.extent(2), c = h * hs;
  Kokkos::parallel_for(
      "attention_merge_heads_qkv", Range(0, b * t), KOKKOS_LAMBDA(const int64_t bt) {
        const int64_t bb = bt / t, tt = bt % t;
        T* dst = &dqkv(bt, 0);
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t d = 0; d < hs; ++d) {
            dst[hh * hs + d] = dq(bb * h + hh, tt, d);
            dst[c + hh * hs + d] = dk(bb * h + hh, tt, d);
            dst[2 * c + hh * hs + d] = dv(bb * h + hh, tt, d);
          }
      });
}

// (B*H, T, hs) <-> (B*T, C) for the attention output and its gradient.
template <class T>
void attention_merge_heads(V2<T> out, V3<const T> y, int64_t b, int64_t t, int64_t h) {
  const int64_t hs = y.extent(2);
  Kokkos::parallel_for(
      "attention_merge_heads", Range(0, b * t), KOKKOS_LAMBDA(const int64_t bt) {
        const int64_t bb = bt / t, tt = bt % t;
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t d = 0; d < hs; ++d) out(bt, hh * hs + d) = y(bb * h + hh, tt, d);
      });
}
template <class T>
void attention_split_output(V3<T> y, V2<const T> out, int64_t b, int64_t t, int64_t h) {
  const int64_t hs = y.extent(2);
  Kokkos::parallel_for(
      "attention_split_output", Range(0, b * t), KOKKOS_LAMBDA(const int64_t bt) {
        const int64_t bb = bt / t, tt = bt % t;
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t d = 0; d < hs; ++d) y(bb * h + hh, tt, d) = out(bt, hh * hs + d);
      });
}

// The products with the (T, T) score matrices skip their masked upper triangle: rows go
// in blocks of `block`, and block [r0, r1) meets keys [0, r1) only. The block trades the
// flops skipped, (1 + block / T) / 2 of the square's are done, against smaller GEMMs.
inline int64_t causal_block_rows(int64_t t) { return t <= 512 ? 64 : 128; }

// s (N, T, T) = alpha * x y^T on and below the diagonal blocks, for x, y (N, T, hs); the
// entries right of each row block's last key are not written.
template <class T>
void causal_scores(T alpha, V3<const T> x, V3<const T> y, V3<T> s, int64_t block) {
  const int64_t n = s.extent(0), t = s.extent(1), hs = x.extent(2);
  for (int64_t r0 = 0; r0 < t; r0 += block) {
    const int64_t r1 = std::min(t, r0 + block);
    gemm_strided_batched<T>('N', 'T', r1 - r0, r1, hs, alpha, x.data() + r0 * hs, hs, t * hs, y.data(), hs, t * hs,
                            T(0), s.data() + r0 * t, t, t * t, n);
  }
}

// z (N, T, hs) = p w for p (N, T, T) zero above the diagonal (read on and below the
// diagonal blocks only) and w (N, T, hs).
template <class T>
void causal_times(V3<const T> p, V3<const T> w, V3<T> z, int64_t block) {
  const int64_t n = p.extent(0), t = p.extent(1), hs = w.extent(2);
  for (int64_t r0 = 0; r0 < t; r0 += block) {
    const int64_t r1 = std::min(t, r0 + block);
    gemm_strided_batched<T>('N', 'N', r1 - r0, hs, r1, T(1), p.data() + r0 * t, t, t * t, w.data(), hs, t * hs, T(0),
                            z.data() + r0 * hs, hs, t * hs, n);
  }
}

// z (N, T, hs) = p^T w, p as in causal_times: column block [c0, c1) of p is zero above row c0.
template <class T>
void causal_transposed_times(V3<const T> p, V3<const T> w, V3<T> z, int64_t block) {
  const int64_t n = p.extent(0), t = p.extent(1), hs = w.extent(2);
  for (int64_t c0 = 0; c0 < t; c0 += block) {
    const int64_t c1 = std::min(t, c0 + block);
    gemm_strided_batched<T>('T', 'N', c1 - c0, hs, t - c0, T(1), p.data() + c0 * t + c0, t, t * t,
                            w.data() + c0 * hs, hs, t * hs, T(0), z.data() + c0 * hs, hs, t * hs, n);
  }
}

// out (B*T, C) = causal attention of qkv (B*T, 3C). buf keeps q, k, v and P.
template <class T>
void attention_forward(V2<T> out, AttentionBuffers<T>& buf, V2<const T> qkv, int64_t b, int64_t t, int64_t h) {
  const int64_t hs = buf.q.extent(2), block = causal_block_rows(t);
  attention_split_heads<T>(buf.q, buf.k, buf.v, qkv, b, t, h);
  causal_scores<T>(T(1), buf.q, buf.k, buf.att, block);                   // S = Q K^T
  softmax_causal_forward<T>(buf.att, T(1) / kmath::sqrt(T(hs)), block);  // P
  causal_times<T>(buf.att, buf.v, buf.y, block);                          // Y = P V
  attention_merge_heads<T>(out, buf.y, b, t, h);
}

// dout (B*T, C) -> dqkv (B*T, 3C). Uses buf from the forward; its y is overwritten by
// dout's per-head layout.
template <class T>
void attention_backward(V2<T> dqkv, AttentionBuffers<T>& buf, V2<const T> dout, int64_t b, int64_t t, int64_t h) {
  const int64_t hs = buf.q.extent(2), bh = b * h, block = causal_block_rows(t);
  Tensor3<T> dy = buf.y;
  attention_split_output<T>(dy, dout, b, t, h);
  Tensor3<T> datt(Kokkos::view_alloc(Kokkos::WithoutInitializing, "att.dp"), bh, t, t);
  Tensor3<T> dq(Kokkos::view_alloc(Kokkos::WithoutInitializing, "att.dq"), bh, t, hs);
  Tensor3<T> dk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "att.dk"), bh, t, hs);
  Tensor3<T> dv(Kokkos::view_alloc(Kokkos::WithoutInitializing, "att.dv"), bh, t, hs);
  causal_scores<T>(T(1), dy, buf.v, datt, block);                                // dP = dY V^T
  causal_transposed_times<T>(buf.att, dy, dv, block);                            // dV = P^T dY
  softmax_causal_backward<T>(datt, buf.att, T(1) / kmath::sqrt(T(hs)), block);  // dS
  causal_times<T>(datt, buf.k, dq, block);                                       // dQ = dS K
  causal_transposed_times<T>(datt, buf.q, dk, block);                            // dK = dS^T Q
  attention_merge_heads_qkv<T>(dqkv, dq, dk, dv, b, t, h);
}

}  // namespace strata::kernels
