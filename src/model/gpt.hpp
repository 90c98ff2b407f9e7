#pragma once
// The GPT model as a list of blocks: Embedding, L TransformerBlocks, LMHead (tied to the
// embedding). It owns the parameter store (this rank's shards). With a tensor split, every
// rank of the tensor group is given the replica's whole batch; in 2D, rank (i, j) runs
// the blocks on batch block i. With a context split (parallel/context_parallel.hpp) every
// rank of the context group is given the replica's whole sequences and keeps its two
// chunks of each (tokens and targets), T/X rows per sequence. It is a StageModel (stage_model.hpp): as a pipeline stage
// (StagePlacement) it runs its layers on one micro-batch at a time with caches the engine
// owns; forward/backward of tokens alone run the whole model on one cache of its own
// (tests, generation).
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/deck.hpp"
#include "model/embedding_block.hpp"
#include "model/lm_head.hpp"
#include "model/ode_network.hpp"
#include "model/stage_model.hpp"
#include "model/transformer_block.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/expert_parallel.hpp"
#include "parallel/stage_placement.hpp"
#include "state/pass_params.hpp"
#include "state/pass_pieces.hpp"

namespace strata {

template <class T>
struct GPTActivations : StageCache {
  int chunk = 0;                     // the stage's chunk it runs (interleaved)
  Tensor1<int32_t> tokens, targets;  // context split: the local rows' token ids and targets
  EmbeddingCache<T> emb;
  std::vector<TransformerCache<T>> blocks;
  LMHeadCache<T> head;
  Tensor2<T> dres;                      // (BT, C) residual-stream gradient, reused layer by layer
  TransformerRecomputed<T> recomputed;  // parallel.recompute = "selective" only
  // parallel.recompute = "full": each block's input, the stage's output (the head's input,
  // what is sent on); the blocks share one cache, the first held block's
  std::vector<Tensor2<T>> block_inputs;
  Tensor2<T> out;
  V2<const T> input;  // the stage's input (the previous stage's output), owned by the caller
  int64_t bytes() const override {
    int64_t b = emb.bytes() + head.bytes() + recomputed.bytes() + view_bytes(dres, out, tokens, targets);
    for (const auto& c : blocks) b += c.bytes();
    for (const auto& x : block_inputs) b += view_bytes(x);
    return b;
  }
};

template <class T>
class GPT : public StageModel<T> {
 public:
  using typename StageModel<T>::GradReadyFn;
  using StageModel<T>::backward;

  // tp: the tensor split and its communicators (which must outlive the model). placement:
  // this rank's pipeline stage (default: the whole model).
  // recompute: what the blocks' backward recomputes (parallel.recompute); the products
  // run in cfg.precision. allocate = false declares the parameters without memory (the
  // planner's dry model: shards, traffic and sizes, no forward or backward). cp: the
  // context split and its ring (which must outlive the model).
  GPT(const ModelConfig& cfg, uint64_t seed, const TensorParallel& tp = {}, StagePlacement placement = {},
      Recompute recompute = Recompute::None, bool allocate = true, const ContextParallel& cp = {},
      const ExpertParallel& ep = {});
  GPT(const GPT&) = delete;
  GPT& operator=(const GPT&) = delete;
  ~GPT() override;

  // The whole model (one stage) on the replica's batch: tokens, targets (batch*seq_len)
  // on device, ctx.batch sequences. Returns the sum of its token losses, the same on every
  // rank of the group. The backward of the last such forward: dloss_scale is dL/d(loss of
  // one token), e.g. 1/(global tokens) for a mean loss; accumulates into params().grads().
  double forward(const BlockContext& ctx, V1<const int32_t> tokens, V1<const int32_t> targets);
  void backward(const BlockContext& ctx, T dloss_scale, const GradReadyFn& on_ready = {});

  // StageModel: ctx.batch sequences; the stage's rows and hidden block on this rank.
  std::unique_ptr<StageCache> make_cache(int chunk = 0) const override {
    auto cache = std::make_unique<GPTActivations<T>>();
    cache->chunk = chunk;
    return cache;
  }
  double forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T> input, StageCache& cache) override;
  V2<const T> output(const StageCache& cache) const override;
  std::pair<int64_t, int64_t> boundary_shape(const BlockContext& ctx) const override {
    return {local_context(ctx).rows() / tp_.row_split(), cfg_.n_embd / tp_.traits().residual_parts};
  }
  // The halves run the blocks' halves (transformer_block.hpp): the input half the head's,
  // every block's, last first; the weight half the head's tied-embedding product, every
  // block's linears, then the embedding's lookup gradients. The blocks' caches keep the
  // operands (no extra memory); recomputation is refused (a selectively recomputed block
  // needs its weight half right after its input half, a fully recomputed one its own
  // cache, which the stage's blocks share).
  void backward_input(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache) override;
  void backward_weight(const BlockContext& ctx, StageCache& cache, const GradReadyFn& on_ready) override;
  V2<const T> input_grad(const StageCache& cache) const override { return as_acts(cache).dres; }
  const StagePlacement& placement() const override { return placement_; }
  int64_t targets_per_sample() const override { return cfg_.seq_len; }

  // Logits of the last forward (before any backward overwrites them): (batch*seq_len,
  // vocab) without a tensor split, else this rank's rows and vocabulary columns.
  V2<const T> logits() const { return (share_head_ ? shared_head_ : act_.head).logits; }
  ParamStore<T>& params() override { return store_; }
  const ParamStore<T>& params() const override { return store_; }
  const ModelConfig& config() const { return cfg_; }
  const TensorParallel& tensor_parallel() const override { return tp_; }
  const ContextParallel& context_parallel() const { return cp_; }
  // Mixture of experts: the auxiliary losses of this rank's forwards since the last
  // call, per unit of the loss scale (MoeLayer::forward), and the routing counted so far
  // over this stage's mixture layers (summed over them).
  double take_aux_loss() {
    const double a = aux_loss_;
    aux_loss_ = 0;
    return a;
  }
  ExpertLoad mixture_load() const;
  void reset_mixture_load();
  // the assignments this rank's mixtures dropped since the model was built (MoeLayer::dropped_here)
  int64_t mixture_dropped_here() const;
  // What one micro-batch's forward and backward on this stage sends (comm/traffic.hpp),
  // call for call: the blocks' tensor-parallel operators and the 2D loss sum.
  void micro_batch_traffic(const BlockContext& ctx, Traffic& out, int chunk = 0) const override;
  // ZeRO-2/3: both follow from the chunks' pieces (pass_pieces)
  std::vector<FlatRange> grad_ready_order() const override;
  ParamSteps param_steps(int chunk, bool backward) const override;
  // ZeRO-2/3's finer units (with sharded = true, where the model allows them: no 2D or 3D split,
  // no sequence parallelism; the caller passes false for the zero-bubble schedules, whose
  // backward halves keep whole blocks): each block is four units (ln1 + qkv, proj + ln2,
  // fc, fc_proj; a mixture block two), the tied wte one unit per chunk of 4 C vocabulary
  // rows, and wpe one; the layers step through them (UnitHooks), so a rank holds one or two
  // such units' parameters and gradients at a time (shards: the data group's size, which
  // the chunks' rows are a multiple of). Call before the store is sharded.
  // grad_ready_order() is then the sequence the backward names, the chunks of wte twice
  // where the stage runs the head and the embedding.
  void use_fine_units(bool sharded, int shards);
  bool fine_units() const override { return fine_; }
  StageMemory memory_for(const BlockContext& ctx, int chunk = 0, bool loss_cache_shared = false) const override;
  // Layer-parallel training (placement.holds_layer_steps()): the blocks between the
  // buffers as ODE steps (gpt_layer_steps.hpp), else nullptr.
  // For them, one block l at a time as a step of size scale (TransformerBlock::forward) on
  // ctx.batch whole sequences (no tensor or context split), in a cache of the caller's,
  // with the model's scratch; and its backward: dres holds dL/d(out) on entry and dL/d(x)
  // on return. With weights the block's gradients are set to this pass's (a pass without
  // them leaves its layer norms' gains and biases with theirs).
  void block_forward(int l, const BlockContext& ctx, V2<const T> x, TransformerCache<T>& cache, T scale);
  void block_backward(int l, const BlockContext& ctx, V2<T> dres, TransformerCache<T>& cache, bool weights);
  // On the last stage: one LM-head cache (logits, the largest piece) for every micro-batch.
  // Its weight half then runs with its input half (the next forward overwrites the logits).
  void share_loss_layer_cache(bool share) override { share_head_ = share && placement_.last(); }
  int64_t shared_cache_bytes() const override { return share_head_ ? shared_head_.bytes() : 0; }
  // Training FLOPs of one micro-batch of ctx on this rank: this stage's share of
  // flops_per_token() (the LM head's product where the head runs), over the tensor group.
  double stage_flops(const BlockContext& ctx) const;
  // Training FLOPs per token: 6 N (N without the position table, which is a lookup)
  // plus 12 L T C for attention (QK^T and PV, forward and backward).
  double flops_per_token() const;
  // Of stage_flops(ctx), attention's products (12 L T C per token, the full T x T) ...
  double attention_model_flops(const BlockContext& ctx) const;
  // ... and the work the fused kernel does for them (kernels/attention.hpp): the unmasked
  // query-key pairs, T (T + 1) / 2 per head and sequence, at 4 hs flops each forward and
  // 8 hs backward, on this stage's layers, over the tensor group. The planner times it at
  // the machine's attention rate, which calibrate measures with the same count.
  double attention_kernel_flops(const BlockContext& ctx) const;

 protected:
  int64_t layer_workspace_bytes() const override {
    return context_workspace_.bytes() + grad_scratch_.bytes() + view_bytes(vocab_chunk_);
  }
  // block by block: each block's input half, then its weight half
  void run_backward(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache,
                    const GradReadyFn& on_ready) override;

 private:
  // memory_for's parts: one cache (the head's in it unless shared_head), the shared head
  // cache, the workspace
  int64_t cache_bytes(const BlockContext& ctx, int chunk, bool shared_head) const;
  int64_t head_cache_bytes(const BlockContext& ctx) const;
  int64_t workspace_bytes_for(const BlockContext& ctx) const;
  // The rows of the replica's batch this rank runs the blocks on: T/X of each sequence
  // under a context split, and in 2D its batch block of those.
  BlockContext local_context(const BlockContext& replica) const;
  std::pair<int64_t, int64_t> local_rows(const BlockContext& replica) const;  // [begin, end)
  // The backward's common start: sizes dres, and fills it with dout or (last stage) with
  // the head's input half.
  // dres from dout, or on the last stage from the head's backward: its input half, or
  // with whole_head both halves at once (LMHead::backward; with units, chunk by chunk).
  void start_backward(const BlockContext& local, T dloss_scale, V2<const T> dout, GPTActivations<T>& act,
                      bool whole_head, const UnitHooks* units = nullptr);
  // The finer units' ranges: wte's vocabulary chunks, wpe, block l's units (in the order
  // its forward reads them); and the buffer a head's chunk of logits is made in.
  std::vector<std::pair<int64_t, int64_t>> wte_chunk_ranges() const;
  std::pair<int64_t, int64_t> wpe_range() const { return {wte_end_offset(), embedding_range().second}; }
  std::vector<std::pair<int64_t, int64_t>> block_unit_ranges(int l) const;
  // The chunk's parameters piece by piece (state/pass_pieces.hpp), and one pass's walk
  // through them.
  PassPieces pass_pieces(int chunk) const;
  PassParams<T> pass_params(int chunk, bool backward);
  V2<T> vocab_chunk(int64_t rows);
  LMHeadCache<T>& head_cache(GPTActivations<T>& act) { return share_head_ ? shared_head_ : act.head; }
  static GPTActivations<T>& as_acts(StageCache& c) { return static_cast<GPTActivations<T>&>(c); }
  static const GPTActivations<T>& as_acts(const StageCache& c) { return static_cast<const GPTActivations<T>&>(c); }

  ModelConfig cfg_;
  TensorParallel tp_;   // before the blocks, which keep a reference to it
  ContextParallel cp_;  // likewise
  Recompute recompute_ = Recompute::None;
  StagePlacement placement_;
  ParamStore<T> store_;
  std::unique_ptr<EmbeddingBlock<T>> embedding_;
  // the context split's buffers, kept between calls and shared by the blocks (declared
  // before them: they hold its address)
  ContextWorkspace<T> context_workspace_;
  // the blocks' backward scratch (and under sequence parallelism the gathers' buffers),
  // one for all micro-batches: a stage runs one pass at a time, and nothing in it outlives
  // the pass (the zero-bubble schedules' weight halves read their caches, and refuse
  // sequence parallelism, whose weight half reads the gathers)
  TransformerGradScratch<T> grad_scratch_;
  std::vector<TransformerBlock<T>> blocks_;
  std::unique_ptr<LMHead<T>> head_;
  GPTActivations<T> act_;
  bool share_head_ = false;  // share_loss_layer_cache
  bool fine_ = false;        // use_fine_units
  int64_t chunk_rows_ = 0;   // of a vocabulary chunk (fine units)
  Tensor2<T> vocab_chunk_;   // a chunk of the head's logits (fine units)
  LMHeadCache<T> shared_head_;
  double aux_loss_ = 0;  // take_aux_loss
  // Flat-buffer ranges [begin, end) of the embedding, of each block, of the final norm
  // (the parameters before ParamStore::expert_begin(): the experts' are summed apart),
  // from where the store has their parameters now (ZeRO-2 lays the buffer out again).
  std::pair<int64_t, int64_t> embedding_range() const;
  int64_t wte_end_offset() const;  // where the (first) wte parameter ends
  // The embedding's ranges as two: the tied wte apart from the rest (ZeRO-2's units: the
  // same unit as the last stage's copy of wte), each to ready(range).
  template <class Ready>
  void ready_embedding(const Ready& ready) const;
  std::pair<int64_t, int64_t> block_range(int l) const;
  std::pair<int64_t, int64_t> lnf_range() const;
  int held_block() const;                       // the first block this rank holds (its widths are every held block's)
  std::vector<int> block_first_;                // each block's first parameter (its ln1 weight)
  int lnf_first_ = 0;                           // the final norm's weight
};

}  // namespace strata
