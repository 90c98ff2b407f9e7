#pragma once
// The GPT model as a list of blocks: Embedding, L TransformerBlocks, LMHead (tied to the
// embedding). It owns the parameter store and, for drivers that run one micro-batch at a
// time, one set of activation caches.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/deck.hpp"
#include "model/embedding_block.hpp"
#include "model/lm_head.hpp"
#include "model/transformer_block.hpp"

namespace strata {

template <class T>
struct GPTActivations {
  EmbeddingCache<T> emb;
  std::vector<TransformerCache<T>> blocks;
  LMHeadCache<T> head;
  Tensor2<T> dres;  // (BT, C) residual-stream gradient, reused layer by layer
  TransformerGradScratch<T> scratch;
};

template <class T>
class GPT {
 public:
  GPT(const ModelConfig& cfg, uint64_t seed);

  // tokens, targets: (batch*seq_len) on device. Returns the sum of the token losses.
  double forward(const BlockContext& ctx, V1<const int32_t> tokens, V1<const int32_t> targets);
  // Called during the backward with a range [offset, offset + count) of the flat gradient
  // buffer as soon as it is final, so a driver can start reducing it while the backward
  // goes on. Ranges arrive from the end of the buffer towards its start, each adjacent to
  // the one before.
  using GradReadyFn = std::function<void(int64_t offset, int64_t count)>;

  // Backward of the last forward. dloss_scale is dL/d(loss of one token), e.g.
  // 1/(global tokens) for a mean loss. Accumulates into params().grads().
  void backward(const BlockContext& ctx, T dloss_scale, const GradReadyFn& on_ready = {});

  // Logits (batch*seq_len, vocab) of the last forward (before any backward overwrites them).
  V2<const T> logits() const { return act_.head.logits; }
  ParamStore<T>& params() { return store_; }
  const ModelConfig& config() const { return cfg_; }
  // Training FLOPs per token: 6 N (N without the position table, which is a lookup)
  // plus 12 L T C for attention (QK^T and PV, forward and backward).
  double flops_per_token() const;

 private:
  ModelConfig cfg_;
  ParamStore<T> store_;
  std::unique_ptr<EmbeddingBlock<T>> embedding_;
  std::vector<TransformerBlock<T>> blocks_;
  std::unique_ptr<LMHead<T>> head_;
  GPTActivations<T> act_;
  // Flat-buffer ranges [begin, end) of the embedding, of each block, of the final norm.
  std::pair<int64_t, int64_t> embedding_range_, lnf_range_;
  std::vector<std::pair<int64_t, int64_t>> block_ranges_;
};

}  // namespace strata
