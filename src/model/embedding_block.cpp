#include "model/embedding_block.hpp"

#include "model/tensor_shard.hpp"
#include "parallel/tp_traffic.hpp"
#include "parallel/vocab_parallel.hpp"

namespace strata {

template <class T>
EmbeddingBlock<T>::EmbeddingBlock(ParamStore<T>& store, const TensorParallel& tp, const StagePlacement& placement,
                                  int64_t vocab, int64_t seq_len, int64_t c, double std)
    : store_(store), tp_(tp) {
  Shard wte = tensor_shard(tp, {vocab, c}, 0, 0, 1);
  if (placement.stages > 1) {  // two pipeline copies: the first stage's owns it
    wte.replica = wte.replica * 2 + (placement.first() ? 0 : 1);
    wte.replicas *= 2;
  }
  if (!placement.first() && !placement.last()) wte = not_held({vocab, c});
  wte_ = store.add("wte", {vocab, c}, Init::Normal, std, true, wte);
  wpe_ = store.add("wpe", {seq_len, c}, Init::Normal, std, true,
                   placement.first() ? tensor_shard(tp, {seq_len, c}, -1, -1, 1) : not_held({seq_len, c}));
}

template <class T>
void EmbeddingBlock<T>::forward(const BlockContext& local, V1<const int32_t> tokens, EmbeddingCache<T>& cache) const {
  cache.ensure(local.rows(), store_.infos()[wpe_].count[1]);
  cache.tokens = tokens;
  tp_embedding_forward<T>(tp_, cache.out, tokens, store_.param2(wte_), store_.param2(wpe_), local.seq_len,
                          cache.scratch);
}

template <class T>
void EmbeddingBlock<T>::backward(const BlockContext& local, V2<const T> dout, EmbeddingCache<T>& cache) const {
  tp_embedding_backward<T>(tp_, store_.grad2(wte_), store_.grad2(wpe_), dout, cache.tokens, local.seq_len,
                           cache.scratch);
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
