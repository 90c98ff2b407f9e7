#pragma once
// The GPT model as a list of blocks: Embedding, L TransformerBlocks, LMHead (tied to the
// embedding). It owns the parameter store (this rank's shards) and, for drivers that run
// one micro-batch at a time, one set of activation caches. With a tensor split, every rank
// of the tensor group is given the replica's whole batch; in 2D, rank (i, j) runs the
// blocks on batch block i. As a pipeline stage (StagePlacement) it runs its layers on one
// micro-batch at a time with activations the driver owns (forward_micro/backward_micro).
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/deck.hpp"
#include "model/embedding_block.hpp"
#include "model/lm_head.hpp"
#include "model/stage_placement.hpp"
#include "model/transformer_block.hpp"

namespace strata {

template <class T>
struct GPTActivations {
  EmbeddingCache<T> emb;
  std::vector<TransformerCache<T>> blocks;
  LMHeadCache<T> head;
  Tensor2<T> dres;  // (BT, C) residual-stream gradient, reused layer by layer
  TransformerGradScratch<T> scratch;
  int64_t bytes() const {
    int64_t b = emb.bytes() + head.bytes() + scratch.bytes() + view_bytes(dres);
    for (const auto& c : blocks) b += c.bytes();
    return b;
  }
};

template <class T>
class GPT {
 public:
  // tp: the tensor split and its communicators (which must outlive the model). placement:
  // this rank's pipeline stage (default: the whole model).
  // allocate = false declares the parameters without memory (the planner's dry model:
  // shards, traffic and sizes, no forward or backward).
  GPT(const ModelConfig& cfg, uint64_t seed, const TensorParallel& tp = {}, StagePlacement placement = {},
      bool allocate = true);
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

  // One pipeline stage's pass over one micro-batch (ctx.batch of its sequences; tokens
  // and targets are the micro-batch's). input: the previous stage's output (empty on the
  // first stage), which must outlive the backward. Returns the sum of the token losses on
  // the last stage, 0 elsewhere.
  double forward_micro(const BlockContext& ctx, V1<const int32_t> tokens, V1<const int32_t> targets,
                       V2<const T> input, GPTActivations<T>& act);
  // This stage's output of the micro-batch whose forward filled act.
  V2<const T> stage_output(const GPTActivations<T>& act) const;
  // (rows, columns) of the activation passed between stages for a micro-batch of ctx.batch
  // sequences: this rank's rows and hidden block.
  std::pair<int64_t, int64_t> stage_activation_shape(const BlockContext& ctx) const {
    return {local_context(ctx).rows(), tp_.mode == TensorMode::TwoD ? cfg_.n_embd / tp_.q : cfg_.n_embd};
  }
  // dout: the gradient of stage_output (empty on the last stage). Leaves the gradient of
  // the stage's input in act.dres (not on the first stage); accumulates parameter gradients.
  void backward_micro(const BlockContext& ctx, T dloss_scale, V2<const T> dout, GPTActivations<T>& act,
                      const GradReadyFn& on_ready = {});
  const StagePlacement& placement() const { return placement_; }
  int wte_index() const { return embedding_->wte_index(); }

  // Logits of the last forward (before any backward overwrites them): (batch*seq_len,
  // vocab) without a tensor split, else this rank's rows and vocabulary columns.
  V2<const T> logits() const { return act_.head.logits; }
  ParamStore<T>& params() { return store_; }
  const ParamStore<T>& params() const { return store_; }
  const ModelConfig& config() const { return cfg_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  // Bytes of activation caches and gradient scratch this rank holds (after a forward and
  // backward have sized them).
  int64_t activation_bytes() const;
  // What one micro-batch's forward and backward on this stage sends (comm/traffic.hpp),
  // call for call: the blocks' tensor-parallel operators and the 2D loss sum.
  void micro_batch_traffic(const BlockContext& ctx, Traffic& out) const;
  // The flat-gradient ranges backward_micro hands to on_ready, in its order.
  std::vector<std::pair<int64_t, int64_t>> grad_ready_order() const;
  // Bytes of one GPTActivations after a forward and backward of ctx on this stage (what
  // activation_bytes() reports for one micro-batch in flight).
  int64_t activation_bytes_for(const BlockContext& ctx) const;
  // Training FLOPs of one micro-batch of ctx on this rank: this stage's share of
  // flops_per_token() (the LM head's product where the head runs), over the tensor group.
  double stage_flops(const BlockContext& ctx) const;
  // Training FLOPs per token: 6 N (N without the position table, which is a lookup)
  // plus 12 L T C for attention (QK^T and PV, forward and backward).
  double flops_per_token() const;

 private:
  // The rows of the replica's batch this rank runs the blocks on.
  BlockContext local_context(const BlockContext& replica) const;
  std::pair<int64_t, int64_t> local_rows(const BlockContext& replica) const;  // [begin, end)

  ModelConfig cfg_;
  TensorParallel tp_;  // before the blocks, which keep a reference to it
  StagePlacement placement_;
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
