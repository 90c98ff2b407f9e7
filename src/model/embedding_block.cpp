#include "model/embedding_block.hpp"

namespace strata {

template <class T>
EmbeddingBlock<T>::EmbeddingBlock(ParamStore<T>& store, int64_t vocab, int64_t seq_len, int64_t c, double std)
    : store_(store), c_(c) {
  wte_ = store.add("wte", {vocab, c}, Init::Normal, std, true);
  wpe_ = store.add("wpe", {seq_len, c}, Init::Normal, std, true);
}

template <class T>
void EmbeddingBlock<T>::forward(const BlockContext& ctx, V1<const int32_t> tokens, EmbeddingCache<T>& cache) const {
  cache.ensure(ctx.rows(), c_);
  cache.tokens = tokens;
  kernels::embedding_forward<T>(cache.out, tokens, store_.param2(wte_), store_.param2(wpe_), ctx.seq_len);
}

template <class T>
void EmbeddingBlock<T>::backward(const BlockContext& ctx, V2<const T> dout, EmbeddingCache<T>& cache) const {
  kernels::embedding_backward<T>(store_.grad2(wte_), store_.grad2(wpe_), dout, cache.tokens, ctx.seq_len);
}

template class EmbeddingBlock<float>;
template class EmbeddingBlock<double>;

}  // namespace strata
