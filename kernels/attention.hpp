#pragma once
// Fused causal multi-head self-attention, FlashAttention-2's algorithm (Dao 2023), on a
// packed qkv activation (B*T, 3C) whose columns are [q | k | v], each C = H*hs wide and
// head-major inside. No (T, T) matrix is ever stored: what the forward keeps for the
// backward is its output O and the logsumexp of each query row's scaled scores, (B*H, T).
//
// Forward, per query block Q_i (`rows` rows) and each key block K_j, V_j (`keys` keys) at
// or left of its diagonal (blocks wholly above it are skipped):
//   S = Q_i K_j^T;  m' = max(m, rowmax(S) / sqrt(hs));  P = exp(S / sqrt(hs) - m');
//   l = l exp(m - m') + rowsum(P);  O_i = O_i exp(m - m') + P V_j;  m = m'
// then O_i /= l and lse = m + log l. The online softmax subtracts the running maximum,
// so no exp overflows however large the scores; the first key block holds key 0, which
// every query row sees, so each row has a finite maximum from its first block on.
// Backward, with D = rowsum(dO * O), per key block K_j, V_j and each query block at or
// below its diagonal (the probabilities remade from Q, K and lse):
//   P = exp(Q_i K_j^T / sqrt(hs) - lse);  dV_j += P^T dO_i;  dP = dO_i V_j^T;
//   dS = P (dP - D) / sqrt(hs);  dK_j += dS^T Q_i;  dQ_i += dS K_j
//
// The block products are kernels::product_strided_batched calls on `heads` heads at once
// where they lie in qkv (fp32 through BLAS/cuBLAS, or bf16 operands with fp32 sums); the
// softmax steps are Kokkos kernels over those heads' rows, in fp32 (double in the gradient
// checks). Scratch: two (heads, rows, keys) score blocks and a few values per row.
#include <algorithm>
#include <functional>
#include <stdexcept>

#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fast_exp.hpp"
#include "kernels/head_matrices.hpp"
#include "kernels/lanes.hpp"
#include "kernels/products.hpp"

namespace strata::kernels {

// How one call cuts the work: query blocks of `rows`, key blocks of `keys`, `heads` heads
// per product.
struct AttentionTiling {
  int64_t rows, keys, heads;
};

// On CPUs one head per thread of the rank, so a (rows, keys) score block and the key block
// it meets stay in its core's cache while the softmax step and the next product read them
// again, and the heads' products run side by side, one on each thread (kernels/gemm.hpp);
// of rows 32-256 by keys 128-1024, and all heads per product against one, 128 x 512 by
// one head ran fastest on one core of the 2-core AMD EPYC (Zen 5) strata is developed on,
// fp32 and bf16, T = 256 to 4096 (bench_kernels; docs/benchmarks.md). Each head's work is
// the same whatever the heads per product: the same bits on any number of threads. The
// backward trims each key block at the query block's last row, so no block wider than the
// diagonal is multiplied.
// On GPUs all local heads per product and larger blocks, so each cuBLAS call fills more
// of the device (not yet measured on one).
inline AttentionTiling attention_tiling(int64_t t, int64_t h) {
#if defined(KOKKOS_ENABLE_CUDA)
  (void)t;
  return {256, 512, h};
#else
  (void)t, (void)h;
  return {128, 512, int64_t(Kokkos::DefaultHostExecutionSpace().concurrency())};
#endif
}

// The g heads' (nr, nk) blocks of a (g, rows, keys) score buffer rounded to bf16 into one
// of the same layout (host memory: only where writes_bf16_operands, i.e. oneDNN on CPUs).
// Each head's rows in as many parts as the rank's threads need (rounding is per value:
// the parts change no bits), each part one call.
template <class T>
void round_score_blocks(const T* src, bf16* dst, int64_t g, int64_t rows, int64_t keys, int64_t nr, int64_t nk) {
  if constexpr (std::is_same_v<T, float>) {
    using Host = Kokkos::DefaultHostExecutionSpace;
    const int64_t threads = Host().concurrency();
    const int64_t parts = std::clamp<int64_t>((threads + g - 1) / g, 1, nr), per = (nr + parts - 1) / parts;
    Kokkos::parallel_for("attention.round_scores", Kokkos::RangePolicy<Host>(0, g * parts), [=](const int64_t i) {
      const int64_t r0 = i % parts * per, n = std::min(per, nr - r0);
      const int64_t at = i / parts * rows * keys + r0 * keys;
      if (n > 0) round_rows_to_bf16(src + at, keys, dst + at, keys, n, nk);
    });
  } else {
    throw std::logic_error("attention: bf16 operands of a product that is not bf16");
  }
}

// f(a) with a score block as its products read it: its bf16 copy where one was made
// (rounded non-null), else its T values.
template <class T, class F>
void with_block(const T* values, const bf16* rounded, F&& f) {
  if (rounded)
    f(rounded);
  else
    f(values);
}

// Which query rows meet which key rows in one call, for context parallelism's ring
// (parallel/ring_attention.hpp), which runs a rank's queries against its own keys and then
// against other ranks' blocks. Queries are rows [q0, q0 + nq) of the local sequence, keys
// and values rows [k0, k0 + nk) of theirs. causal: key row j is visible to query row i iff
// j <= i (both rows of one sequence; k0 <= q0, so every row sees key k0); otherwise every
// key is visible. resume: out and lse already hold the attention of these queries over
// other keys, and this call merges its keys in by the logsumexp (the online softmax
// started from m = lse, l = 1, O = out) instead of starting afresh.
struct AttentionSpan {
  int64_t q0 = 0, nq = 0, k0 = 0, nk = 0;
  bool causal = true, resume = false;
};

// One span's forward: o (the output's head matrices, (B*t, C) rows), lse (B*H, t) with t
// the local sequence's rows; q from the local qkv, k and v wherever the keys lie.
// between_blocks, if given, runs after each query block (ring attention lets MPI move its
// messages along there).
template <class T>
void attention_forward_span(HeadMatrices<T> o, T* lse_ptr, int64_t t, HeadMatrices<const T> q, HeadMatrices<const T> k,
                            HeadMatrices<const T> v, int64_t b, int64_t h, int64_t hs, const AttentionSpan& span,
                            ProductPrecision precision, AttentionTiling tiling,
                            const std::function<void()>& between_blocks = {}) {
  if (span.causal && span.k0 > span.q0)
    throw std::logic_error("attention: a causal span whose first key follows its first query");
  const int64_t c = o.ld, rows = tiling.rows, keys = tiling.keys;
  const int64_t g_max = std::min(tiling.heads, h);
  const T scale = T(1) / kmath::sqrt(T(hs));
  Tensor1<T> s_blk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.scores"), g_max * rows * keys);
  // P only feeds P V: written as bf16 where products read such operands (else left in s)
  const bool p_as_bf16 = writes_bf16_operands<T>(precision);
  Tensor1<bf16> p16_blk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.p16"),
                        p_as_bf16 ? g_max * rows * keys : 0);
  bf16* const p16_ptr = p_as_bf16 ? p16_blk.data() : nullptr;
  Tensor1<T> m_run(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.max"), g_max * rows);
  Tensor1<T> l_run(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.sum"), g_max * rows);
  T* const s_ptr = s_blk.data();
  T* const m_ptr = m_run.data();
  T* const l_ptr = l_run.data();
  const bool causal = span.causal, resume = span.resume;
  const int64_t q_end = span.q0 + span.nq, k_end = span.k0 + span.nk;
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t h0 = 0; h0 < h; h0 += g_max) {
      const int64_t g = std::min(g_max, h - h0);
      for (int64_t r0 = span.q0; r0 < q_end; r0 += rows) {
        const int64_t nr = std::min(rows, q_end - r0), r_end = r0 + nr;
        T* const o_rows = o.at(bb, r0, h0 * hs);
        T* const lse_rows = lse_ptr + (bb * h + h0) * t + r0;
        if (resume)  // the running state of the keys seen so far: m = lse, l = 1, O = out
          for_each_row(
              "attention_forward.resume", g * nr, KOKKOS_LAMBDA(const int64_t i) {
                const int64_t gg = i / nr, ri = i % nr;
                m_ptr[gg * rows + ri] = lse_rows[gg * t + ri];
                l_ptr[gg * rows + ri] = T(1);
              });
        // keys past the block's last row are masked for all of its rows
        const int64_t c_end = causal ? std::min(k_end, r_end) : k_end;
        for (int64_t c0 = span.k0; c0 < c_end; c0 += keys) {
          const int64_t nk = std::min(keys, c_end - c0);
          const bool first = !resume && c0 == span.k0;
          product_strided_batched<T>(precision, 'N', 'T', nr, nk, hs, q.at(bb, r0, h0 * hs), q.ld, q.head_stride,
                                     k.at(bb, c0, h0 * hs), k.ld, k.head_stride, T(0), s_ptr, keys, rows * keys, g);
          for_each_row(
              "attention_forward.softmax_step", g * nr, KOKKOS_LAMBDA(const int64_t i) {
                const int64_t gg = i / nr, ri = i % nr;
                T* s = s_ptr + (gg * rows + ri) * keys;
                const int64_t seen = causal ? r0 + ri + 1 - c0 : nk;  // keys of this block the row may see
                const int64_t valid = seen < nk ? seen : nk;
                if (valid <= 0) {  // the whole block is in this row's future
                  for (int64_t j = 0; j < nk; ++j) s[j] = T(0);
                  return;
                }
                const T block_max = lane_max<T>(valid, [&](int64_t j) { return s[j]; }) * scale;
                const T m_old = m_ptr[gg * rows + ri];
                const T m_new = first || block_max > m_old ? block_max : m_old;
                const T sum = lane_sum<T>(valid, [&](int64_t j) { return s[j] = fast_exp(s[j] * scale - m_new); });
                for (int64_t j = valid; j < nk; ++j) s[j] = T(0);
                if (first) {
                  l_ptr[gg * rows + ri] = sum;
                } else {
                  const T alpha = fast_exp(m_old - m_new);
                  l_ptr[gg * rows + ri] = l_ptr[gg * rows + ri] * alpha + sum;
                  T* orow = o_rows + ri * c + gg * hs;
                  for (int64_t d = 0; d < hs; ++d) orow[d] *= alpha;
                }
                m_ptr[gg * rows + ri] = m_new;
              });
          if (p_as_bf16) round_score_blocks<T>(s_ptr, p16_ptr, g, rows, keys, nr, nk);
          with_block(s_ptr, p16_ptr, [&](auto p) {
            product_strided_batched<T>(precision, 'N', 'N', nr, hs, nk, p, keys, rows * keys, v.at(bb, c0, h0 * hs),
                                       v.ld, v.head_stride, first ? T(0) : T(1), o_rows, o.ld, o.head_stride, g);
          });
        }
        for_each_row(
            "attention_forward.normalise", g * nr, KOKKOS_LAMBDA(const int64_t i) {
              const int64_t gg = i / nr, ri = i % nr;
              const T l = l_ptr[gg * rows + ri];
              const T inv = T(1) / l;
              T* orow = o_rows + ri * c + gg * hs;
              for (int64_t d = 0; d < hs; ++d) orow[d] *= inv;
              lse_rows[gg * t + ri] = m_ptr[gg * rows + ri] + kmath::log(l);
            });
        if (between_blocks) between_blocks();
      }
    }
}

// out (B*T, C) = causal attention of qkv (B*T, 3C) with h heads; lse (B*H, T) the
// logsumexp of each row's scaled scores (what the backward needs with out).
template <class T>
void attention_forward(V2<T> out, V2<T> lse, V2<const T> qkv, int64_t b, int64_t t, int64_t h,
                       ProductPrecision precision = Precision::FP32, AttentionTiling tiling = {0, 0, 0}) {
  if (tiling.rows == 0) tiling = attention_tiling(t, h);
  const int64_t c = out.extent(1), hs = c / h;
  const auto rounded_qkv = round_for_pass(precision, qkv.data(), int64_t(qkv.size()));
  attention_forward_span<T>(
      head_columns<T>(out.data(), t, c, 0, hs), lse.data(), t, head_columns<const T>(qkv.data(), t, 3 * c, 0, hs),
      head_columns<const T>(qkv.data(), t, 3 * c, c, hs), head_columns<const T>(qkv.data(), t, 3 * c, 2 * c, hs), b, h,
      hs, {0, t, 0, t, true, false}, precision, tiling);
}

// D = rowsum(dO * O) per head and row, (B*H, T) as lse: the backward's per-row constant.
template <class T>
void attention_row_dots(T* d_ptr, V2<const T> out, V2<const T> dout, int64_t b, int64_t t, int64_t h) {
  const int64_t c = dout.extent(1), hs = c / h;
  const T* const y_ptr = out.data();
  const T* const dy_ptr = dout.data();
  for_each_row(
      "attention_backward.d", b * h * t, KOKKOS_LAMBDA(const int64_t i) {
        const int64_t bh = i / t, r = i % t, bb = bh / h, hh = bh % h;
        const T* yr = y_ptr + (bb * t + r) * c + hh * hs;
        const T* dyr = dy_ptr + (bb * t + r) * c + hh * hs;
        d_ptr[i] = lane_sum<T>(hs, [&](int64_t d) { return yr[d] * dyr[d]; });
      });
}

// One span's backward: dQ of the span's query rows (written where !span.resume and the
// key block is the span's first, accumulated otherwise) and dK, dV of its key rows
// (accumulated: the caller zeroes them), from q, k, v, dO (dy), lse and D (B*H, t).
// between_blocks, if given, runs after each pair of key and query blocks.
template <class T>
void attention_backward_span(HeadMatrices<T> dq, HeadMatrices<T> dk, HeadMatrices<T> dv, HeadMatrices<const T> q,
                             HeadMatrices<const T> k, HeadMatrices<const T> v, HeadMatrices<const T> dy,
                             const T* lse_ptr, const T* d_ptr, int64_t t, int64_t b, int64_t h, int64_t hs,
                             const AttentionSpan& span, ProductPrecision precision, AttentionTiling tiling,
                             const std::function<void()>& between_blocks = {}) {
  if (span.causal && span.k0 > span.q0)
    throw std::logic_error("attention: a causal span whose first key follows its first query");
  const int64_t rows = tiling.rows, keys = tiling.keys;
  const int64_t g_max = std::min(tiling.heads, h);
  const T scale = T(1) / kmath::sqrt(T(hs));
  Tensor1<T> p_blk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.p"), g_max * rows * keys);
  Tensor1<T> ds_blk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.ds"), g_max * rows * keys);
  T* const p_ptr = p_blk.data();
  T* const ds_ptr = ds_blk.data();
  // P feeds dV's product and dS (fp32); dS only feeds dK's and dQ's products: where
  // products read such operands as bf16, P is written in both and dS as bf16 only
  const bool as_bf16 = writes_bf16_operands<T>(precision);
  Tensor1<bf16> p16_blk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.p16"),
                        as_bf16 ? g_max * rows * keys : 0);
  Tensor1<bf16> ds16_blk(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.ds16"),
                         as_bf16 ? g_max * rows * keys : 0);
  bf16* const p16_ptr = as_bf16 ? p16_blk.data() : nullptr;
  bf16* const ds16_ptr = as_bf16 ? ds16_blk.data() : nullptr;
  const bool causal = span.causal;
  const int64_t q_end = span.q0 + span.nq, k_end = span.k0 + span.nk;
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t h0 = 0; h0 < h; h0 += g_max) {
      const int64_t g = std::min(g_max, h - h0), col = h0 * hs;
      for (int64_t c0 = span.k0; c0 < k_end; c0 += keys)
        // causal: the query blocks at or below the key block's diagonal
        for (int64_t r0 = causal ? std::max(span.q0, c0) : span.q0; r0 < q_end; r0 += rows) {
          const int64_t nr = std::min(rows, q_end - r0);
          // causal: keys past the block's last row are masked
          const int64_t nk = causal ? std::min({keys, k_end - c0, r0 + nr - c0}) : std::min(keys, k_end - c0);
          const bool first_keys = !span.resume && c0 == span.k0;  // the key block every query row meets first
          const int64_t row_base = (bb * h + h0) * t + r0;        // lse and D of (head h0, row r0)
          product_strided_batched<T>(precision, 'N', 'T', nr, nk, hs, q.at(bb, r0, col), q.ld, q.head_stride,
                                     k.at(bb, c0, col), k.ld, k.head_stride, T(0), p_ptr, keys, rows * keys, g);
          for_each_row(
              "attention_backward.probabilities", g * nr, KOKKOS_LAMBDA(const int64_t i) {
                const int64_t gg = i / nr, ri = i % nr;
                T* p = p_ptr + (gg * rows + ri) * keys;
                const int64_t seen = causal ? r0 + ri + 1 - c0 : nk;
                const int64_t valid = seen < nk ? seen : nk;
                const T row_lse = lse_ptr[row_base + gg * t + ri];
                for (int64_t j = 0; j < valid; ++j) p[j] = fast_exp(p[j] * scale - row_lse);
                for (int64_t j = valid < 0 ? 0 : valid; j < nk; ++j) p[j] = T(0);
              });
          if (as_bf16) round_score_blocks<T>(p_ptr, p16_ptr, g, rows, keys, nr, nk);
          with_block(p_ptr, p16_ptr, [&](auto p) {
            product_strided_batched<T>(precision, 'T', 'N', nk, hs, nr, p, keys, rows * keys, dy.at(bb, r0, col), dy.ld,
                                       dy.head_stride, T(1), dv.at(bb, c0, col), dv.ld, dv.head_stride,
                                       g);  // dV_j += P^T dO_i
          });
          product_strided_batched<T>(precision, 'N', 'T', nr, nk, hs, dy.at(bb, r0, col), dy.ld, dy.head_stride,
                                     v.at(bb, c0, col), v.ld, v.head_stride, T(0), ds_ptr, keys, rows * keys,
                                     g);  // dP = dO_i V_j^T
          for_each_row(
              "attention_backward.scores", g * nr, KOKKOS_LAMBDA(const int64_t i) {
                const int64_t gg = i / nr, ri = i % nr;
                const T* p = p_ptr + (gg * rows + ri) * keys;
                T* ds = ds_ptr + (gg * rows + ri) * keys;
                const T row_d = d_ptr[row_base + gg * t + ri];
                for (int64_t j = 0; j < nk; ++j) ds[j] = scale * p[j] * (ds[j] - row_d);
              });
          if (as_bf16) round_score_blocks<T>(ds_ptr, ds16_ptr, g, rows, keys, nr, nk);
          with_block(ds_ptr, ds16_ptr, [&](auto ds) {
            product_strided_batched<T>(precision, 'T', 'N', nk, hs, nr, ds, keys, rows * keys, q.at(bb, r0, col), q.ld,
                                       q.head_stride, T(1), dk.at(bb, c0, col), dk.ld, dk.head_stride,
                                       g);  // dK_j += dS^T Q_i
            product_strided_batched<T>(precision, 'N', 'N', nr, hs, nk, ds, keys, rows * keys, k.at(bb, c0, col), k.ld,
                                       k.head_stride, first_keys ? T(0) : T(1), dq.at(bb, r0, col), dq.ld,
                                       dq.head_stride, g);  // dQ_i += dS K_j
          });
          if (between_blocks) between_blocks();
        }
    }
}

// Zeroes the K and V columns [c, 3c) of a (rows, 3c) packed gradient (they accumulate).
template <class T>
void zero_key_value_columns(V2<T> dqkv) {
  const int64_t c = dqkv.extent(1) / 3;
  T* const ptr = dqkv.data();
  for_each_row(
      "attention_backward.zero_dkv", dqkv.extent(0), KOKKOS_LAMBDA(const int64_t r) {
        T* row = ptr + r * 3 * c + c;
        for (int64_t j = 0; j < 2 * c; ++j) row[j] = T(0);
      });
}

// dout (B*T, C) -> dqkv (B*T, 3C), from the forward's qkv, out and lse.
template <class T>
void attention_backward(V2<T> dqkv, V2<const T> qkv, V2<const T> out, V2<const T> lse, V2<const T> dout, int64_t b,
                        int64_t t, int64_t h, ProductPrecision precision = Precision::FP32,
                        AttentionTiling tiling = {0, 0, 0}) {
  if (tiling.rows == 0) tiling = attention_tiling(t, h);
  const int64_t c = dout.extent(1), hs = c / h;
  const auto part = [&](int64_t i) { return head_columns<const T>(qkv.data(), t, 3 * c, i * c, hs); };
  const auto dpart = [&](int64_t i) { return head_columns<T>(dqkv.data(), t, 3 * c, i * c, hs); };
  const auto rounded_qkv = round_for_pass(precision, qkv.data(), int64_t(qkv.size()));
  const auto rounded_dout = round_for_pass(precision, dout.data(), int64_t(dout.size()));
  Tensor1<T> d_rows(Kokkos::view_alloc(Kokkos::WithoutInitializing, "attention.d"), b * h * t);
  attention_row_dots<T>(d_rows.data(), out, dout, b, t, h);
  // dK and dV accumulate over query blocks that see a varying number of each key block's
  // keys (the blocks are trimmed at the diagonal), so they start from zero
  zero_key_value_columns<T>(dqkv);
  attention_backward_span<T>(dpart(0), dpart(1), dpart(2), part(0), part(1), part(2),
                             head_columns<const T>(dout.data(), t, c, 0, hs), lse.data(), d_rows.data(), t, b, h, hs,
                             {0, t, 0, t, true, false}, precision, tiling);
}

}  // namespace strata::kernels
