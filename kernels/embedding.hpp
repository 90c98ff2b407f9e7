#pragma once
// Token + position embedding: out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :].
#include "core/tensor.hpp"

namespace strata::kernels {

// tokens (B*T), wte (V, C), wpe (maxT, C), out (B*T, C).
template <class T>
void embedding_forward(V2<T> out, V1<const int32_t> tokens, V2<const T> wte, V2<const T> wpe, int64_t t_len) {
  const int64_t c = out.extent(1);
  Kokkos::parallel_for(
      "embedding_forward", Range(0, out.extent(0)), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t tok = tokens(i), pos = i % t_len;
        for (int64_t j = 0; j < c; ++j) out(i, j) = wte(tok, j) + wpe(pos, j);
      });
}

// Accumulates dwte (V, C) and dwpe (maxT, C) from dout (B*T, C). Parallel over
// embedding columns, so rows that share a token never race and the sum order is fixed
// (deterministic, no atomics).
template <class T>
void embedding_backward(V2<T> dwte, V2<T> dwpe, V2<const T> dout, V1<const int32_t> tokens, int64_t t_len) {
  const int64_t n = dout.extent(0), c = dout.extent(1);
  Kokkos::parallel_for(
      "embedding_backward", Range(0, c), KOKKOS_LAMBDA(const int64_t j) {
        for (int64_t i = 0; i < n; ++i) {
          dwte(tokens(i), j) += dout(i, j);
          dwpe(i % t_len, j) += dout(i, j);
        }
      });
}

// The pieces of a vocabulary-parallel embedding, where a rank holds the rows
// [vocab_begin, vocab_begin + V_local) of wte (and possibly a column block of C):
// out (N, C_local) = wte_shard[token - vocab_begin] for tokens in range, 0 otherwise; with
// add, out += those rows and the others are left (a vocabulary chunk's rows after the
// first chunk's: each row gets its token's row once).
template <class T>
void embedding_lookup_range(V2<T> out, V1<const int32_t> tokens, V2<const T> wte_shard, int64_t vocab_begin,
                            bool add = false) {
  const int64_t c = out.extent(1), v = wte_shard.extent(0);
  Kokkos::parallel_for(
      "embedding_lookup_range", Range(0, out.extent(0)), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t tok = int64_t(tokens(i)) - vocab_begin;
        const bool mine = tok >= 0 && tok < v;
        if (add) {
          if (mine)
            for (int64_t j = 0; j < c; ++j) out(i, j) += wte_shard(tok, j);
        } else {
          for (int64_t j = 0; j < c; ++j) out(i, j) = mine ? wte_shard(tok, j) : T(0);
        }
      });
}

// out (N, C_local) += wpe[(first_row + row) % t_len]: out holds rows [first_row,
// first_row + N) of whole sequences of t_len.
template <class T>
void add_positions(V2<T> out, V2<const T> wpe, int64_t t_len, int64_t first_row = 0) {
  const int64_t c = out.extent(1);
  Kokkos::parallel_for(
      "add_positions", Range(0, out.extent(0)), KOKKOS_LAMBDA(const int64_t i) {
        for (int64_t j = 0; j < c; ++j) out(i, j) += wpe((first_row + i) % t_len, j);
      });
}

// dwte_rows += dout rows of the tokens in [vocab_begin, vocab_begin + rows) (a vocabulary
// shard's, or a chunk of it); dwpe += dout by position. Column-parallel and deterministic,
// like embedding_backward (each sum in the rows' order).
template <class T>
void embedding_backward_tokens(V2<T> dwte_rows, V2<const T> dout, V1<const int32_t> tokens, int64_t vocab_begin) {
  const int64_t n = dout.extent(0), c = dout.extent(1), v = dwte_rows.extent(0);
  Kokkos::parallel_for(
      "embedding_backward_tokens", Range(0, c), KOKKOS_LAMBDA(const int64_t j) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t tok = int64_t(tokens(i)) - vocab_begin;
          if (tok >= 0 && tok < v) dwte_rows(tok, j) += dout(i, j);
        }
      });
}
template <class T>
void embedding_backward_positions(V2<T> dwpe, V2<const T> dout, int64_t t_len) {
  const int64_t n = dout.extent(0), c = dout.extent(1);
  Kokkos::parallel_for(
      "embedding_backward_positions", Range(0, c), KOKKOS_LAMBDA(const int64_t j) {
        for (int64_t i = 0; i < n; ++i) dwpe(i % t_len, j) += dout(i, j);
      });
}
// Both (a vocabulary-parallel embedding's backward).
template <class T>
void embedding_backward_range(V2<T> dwte_shard, V2<T> dwpe, V2<const T> dout, V1<const int32_t> tokens,
                              int64_t vocab_begin, int64_t t_len) {
  embedding_backward_tokens<T>(dwte_shard, dout, tokens, vocab_begin);
  embedding_backward_positions<T>(dwpe, dout, t_len);
}
}  // namespace strata::kernels
