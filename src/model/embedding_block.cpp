#include "model/embedding_block.hpp"

#include <stdexcept>

#include "kernels/embedding.hpp"

#include "parallel/tp_traffic.hpp"
#include "parallel/vocab_parallel.hpp"
#include "state/tensor_shard.hpp"

namespace strata {

template <class T>
EmbeddingBlock<T>::EmbeddingBlock(ParamStore<T>& store, const TensorParallel& tp, const ContextParallel& cp,
                                  const StagePlacement& placement, int64_t vocab, int64_t rows, int64_t seq_len,
                                  int64_t c, double std)
    : store_(store), tp_(tp), cp_(cp) {
  Shard wte = tensor_shard(tp, {rows, c}, 0, 0, 1, Split3D{1, 0, -1});
  if (placement.stages > 1) {  // two pipeline copies: the first stage's owns it
    wte.replica = wte.replica * 2 + (placement.first() ? 0 : 1);
    wte.replicas *= 2;
  }
  if (!placement.first() && !placement.last()) wte = not_held({rows, c});
  wte.tied = true;  // the LM head's too (lm_head.hpp)
  wte_ = store.add("wte", {rows, c}, Init::Normal, std, true, wte);
  store.draw_rows_below(wte_, vocab);  // a padding starts at zero, as llm.c's
  wpe_ = store.add(
      "wpe", {seq_len, c}, Init::Normal, std, true,
      placement.first() ? tensor_shard(tp, {seq_len, c}, -1, -1, 1, Split3D{1, -1, -1}) : not_held({seq_len, c}));
}

template <class T>
V2<const T> EmbeddingBlock<T>::positions(const BlockContext& local, EmbeddingCache<T>& cache) const {
  V2<const T> wpe = store_.param2(wpe_);
  if (!cp_.active()) return wpe;
  const int64_t c = store_.infos()[wpe_].count[1];
  ensure_extents(cache.positions, "emb.positions", local.seq_len, c);
  gather_local_rows<T>(cp_, V1<T>(cache.positions.data(), cache.positions.size()), V1<const T>(wpe.data(), wpe.size()),
                       1, local.seq_len * cp_.size, c);
  return cache.positions;
}

template <class T>
void EmbeddingBlock<T>::forward(const BlockContext& local, V1<const int32_t> tokens, EmbeddingCache<T>& cache,
                                const UnitHooks* units) const {
  const int64_t c = store_.infos()[wpe_].count[1];
  cache.ensure(local.rows() / tp_.row_split(), c);  // sequence parallelism: this rank's rows
  cache.tokens = tokens;
  if (units) {
    forward_chunks(local, tokens, cache, *units);
    return;
  }
  tp_embedding_forward<T>(tp_, cache.out, tokens, store_.param2(wte_), positions(local, cache), local.seq_len,
                          cache.scratch);
}

// The rows of each chunk, then the positions: the same sums as the lookup of whole rows
// (a row is its token's row, or zeros plus it, before the position is added).
template <class T>
void EmbeddingBlock<T>::forward_chunks(const BlockContext& local, V1<const int32_t> tokens, EmbeddingCache<T>& cache,
                                       const UnitHooks& units) const {
  if (!tp_.traits().whole_activations)
    throw std::logic_error("EmbeddingBlock: vocabulary chunks under a 2D or 3D split or sequence parallelism");
  const int64_t rows = store_.infos()[wte_].count[0], vb = wte_vocab_begin(tp_, rows);
  for (const auto& [r0, r1] : vocab_chunks(rows, units.chunk_rows)) {
    units.step();
    const V2<const T> part = store_.param_rows(wte_, r0, r1);
    kernels::embedding_lookup_range<T>(cache.out, tokens, part, vb + r0, r0 > 0);
  }
  if (Comm* vocab = tp_.vocab_comm()) vocab->allreduce_sum(V1<T>(cache.out.data(), cache.out.size()));
  units.step();
  kernels::add_positions<T>(cache.out, positions(local, cache), local.seq_len);
}

template <class T>
void EmbeddingBlock<T>::backward(const BlockContext& local, V2<const T> dout, EmbeddingCache<T>& cache,
                                 const UnitHooks* units) const {
  if (units) {
    backward_chunks(local, dout, cache, *units);
    return;
  }
  if (!cp_.active()) {
    tp_embedding_backward<T>(tp_, store_.grad2(wte_), store_.grad2(wpe_), dout, cache.tokens, local.seq_len,
                             cache.scratch);
    return;
  }
  Kokkos::deep_copy(cache.positions, T(0));  // the local rows' position gradients, then added to theirs
  tp_embedding_backward<T>(tp_, store_.grad2(wte_), cache.positions, dout, cache.tokens, local.seq_len, cache.scratch);
  scatter_add_local_rows<T>(cp_, store_.grad2(wpe_), cache.positions);
}

template <class T>
void EmbeddingBlock<T>::backward_chunks(const BlockContext& local, V2<const T> dout, EmbeddingCache<T>& cache,
                                        const UnitHooks& units) const {
  const int64_t rows = store_.infos()[wte_].count[0], vb = wte_vocab_begin(tp_, rows);
  int k = 0;
  for (const auto& [r0, r1] : vocab_chunks(rows, units.chunk_rows)) {
    kernels::embedding_backward_tokens<T>(store_.grad_rows(wte_, r0, r1), dout, cache.tokens, vb + r0);
    units.done(k++);
  }
  if (cp_.active()) {
    Kokkos::deep_copy(cache.positions, T(0));
    kernels::embedding_backward_positions<T>(cache.positions, dout, local.seq_len);
    scatter_add_local_rows<T>(cp_, store_.grad2(wpe_), cache.positions);
  } else {
    kernels::embedding_backward_positions<T>(store_.grad2(wpe_), dout, local.seq_len);
  }
  units.done(k);
}

template <class T>
void EmbeddingBlock<T>::traffic(const BlockContext& local, Traffic& out) const {
  const int64_t c = store_.infos()[wpe_].count[1];
  tp_embedding_forward_traffic(out, tp_, local.rows(), c, sizeof(T));
  tp_embedding_backward_traffic(out, tp_, local.rows(), c, sizeof(T));
}

template class EmbeddingBlock<float>;
template class EmbeddingBlock<double>;

}  // namespace strata
