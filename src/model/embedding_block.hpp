#pragma once
// Token + position embedding: x0 = wte[tokens] + wpe[positions]. wte is [vocab, C] and is
// tied to the LM head; wpe is [seq_len, C].
#include "kernels/embedding.hpp"
#include "model/block_context.hpp"
#include "model/param_store.hpp"

namespace strata {

template <class T>
struct EmbeddingCache {
  Tensor2<T> out;  // (B*T, C)
  V1<const int32_t> tokens;
  void ensure(int64_t rows, int64_t c) {
    if (int64_t(out.extent(0)) != rows) out = Tensor2<T>("emb.out", rows, c);
  }
};

template <class T>
class EmbeddingBlock {
 public:
  EmbeddingBlock(ParamStore<T>& store, int64_t vocab, int64_t seq_len, int64_t c, double std);
  // tokens (B*T) -> cache.out (B*T, C)
  void forward(const BlockContext& ctx, V1<const int32_t> tokens, EmbeddingCache<T>& cache) const;
  // dout (B*T, C): accumulates dwte, dwpe.
  void backward(const BlockContext& ctx, V2<const T> dout, EmbeddingCache<T>& cache) const;
  int wte_index() const { return wte_; }

 private:
  ParamStore<T>& store_;
  int64_t c_;
  int wte_, wpe_;
};

}  // namespace strata
