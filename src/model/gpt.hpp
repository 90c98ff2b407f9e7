#pragma once
// The GPT model as a list of blocks: Embedding, L TransformerBlocks, LMHead (tied to the
// embedding). It owns the parameter store (this rank's shards) and, for drivers that run
// one micro-batch at a time, one set of activation caches. With a tensor split, every rank
// of the tensor group is given the replica's whole batch; in 2D, rank (i, j) runs the
// blocks on batch block i.
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
  // tp: the tensor split and its communicators (which must outlive the model).
  GPT(const ModelConfig& cfg, uint64_t seed, const TensorParallel& tp = {});
  GPT(const GPT&) = delete;
  GPT& operator=(const GPT&) = delete;

  // tokens, targets: (batch*seq_len) on device, the replica's whole batch (ctx.batch
  // sequences). Returns the sum of its token losses, the same on every rank of the group.
  double forward(const BlockContext& ctx, V1<const int32_t> tokens, V1<const int32_t> targets);
  // Called during the backward with a range [offset, offset + count) of the flat gradient
  // buffer as soon as it is final, so a driver can start reducing it while the backward
  // goes on. Ranges arrive from the end of the buffer towards its start, each adjacent to
  // the one before.
  using GradReadyFn = std::function<void(int64_t offset, int64_t count)>;

  // Backward of the last forward. dloss_scale is dL/d(loss of one token), e.g.
  // 1/(global tokens) for a mean loss. Accumulates into params().grads().
  void backward(const BlockContext& ctx, T dloss_scale, const GradReadyFn& on_ready = {});

  // Logits of the last forward (before any backward overwrites them): (batch*seq_len,
  // vocab) without a tensor split, else this rank's rows and vocabulary columns.
  V2<const T> logits() const { return act_.head.logits; }
  ParamStore<T>& params() { return store_; }
  const ModelConfig& config() const { return cfg_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  // Bytes of activation caches and gradient scratch this rank holds (after a forward and
  // backward have sized them).
  int64_t activation_bytes() const;
  // Training FLOPs per token: 6 N (N without the position table, which is a lookup)
  // plus 12 L T C for attention (QK^T and PV, forward and backward).
  double flops_per_token() const;

 private:
  // The rows of the replica's batch this rank runs the blocks on.
  BlockContext local_context(const BlockContext& replica) const;
  std::pair<int64_t, int64_t> local_rows(const BlockContext& replica) const;  // [begin, end)

  ModelConfig cfg_;
  TensorParallel tp_;  // before the blocks, which keep a reference to it
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
