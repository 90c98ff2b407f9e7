#pragma once
// One pre-LN GPT block:
//   x_mid = x + proj(attn(ln1(x)))
//   x_out = x_mid + fc2(gelu(fc1(ln2(x_mid))))
// Weights are stored [in, out]: qkv [C, 3, C] (the q | k | v blocks, i.e. [C, 3C] in
// memory), proj [C, C], fc [C, 4C], fc_proj [4C, C]. Under a tensor split each rank holds
// shards (state/tensor_shard.hpp) and runs the layers of parallel/tp_layers.hpp; attention
// needs no tensor communication, as each rank holds whole heads (1D: H/t heads; 2D: H/q
// heads of its batch block); under a context split it is ring attention over the context
// group (parallel/ring_attention.hpp), every other layer working on the local rows. The qkv weight's middle dimension
// keeps a rank's q, k and v columns of the same heads together in one hyperslab.
#include <memory>
#include <string>
#include <vector>

#include "comm/traffic.hpp"
#include "kernels/attention.hpp"
#include "model/block_context.hpp"
#include "model/moe_layer.hpp"
#include "model/transformer_buffers.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/context_workspace.hpp"
#include "parallel/tensor_parallel.hpp"
#include "state/param_store.hpp"
#include "state/unit_hooks.hpp"

namespace strata {

// What a block with a mixture of experts for its MLP needs besides its sizes.
struct MixtureSetup {
  ModelConfig cfg;  // moe_* keys, n_embd
  ExpertParallel ep;
  TokenPlace place;
};


template <class T>
class TransformerBlock {
 public:
  // held: this rank runs the block (else another pipeline stage does, and the block only
  // declares its parameters). cp: the context split (the rows are local ones, attention
  // goes round the ring; its buffers are the model's context_workspace, which cp.active()
  // needs); tp, cp and the workspace must outlive the block.
  // precision: of the products (model.precision); round_once: model.bf16_round_once
  // (keeps_bf16_operands); recompute: parallel.recompute.
  TransformerBlock(ParamStore<T>& store, const TensorParallel& tp, const ContextParallel& cp, Precision precision,
                   bool round_once, Recompute recompute, int layer, int64_t n_layer, int64_t c, int64_t n_head,
                   double std, bool held = true, const MixtureSetup* mixture = nullptr,
                   ContextWorkspace<T>* context_workspace = nullptr);
  // x (BT', C') -> cache.out (BT', C'). x must outlive the backward. ctx.batch is this
  // rank's sequences (2D: its batch block).
  // recomputed: where the GELU output goes under selective recomputation
  // (parallel.recompute; unused otherwise). scratch: the gathers' buffer under sequence
  // parallelism (unused otherwise). Returns the mixture of experts' auxiliary losses
  // (MoeLayer::forward; 0 for a dense block); again: full recomputation's second forward
  // (the routing is not counted in the load twice).
  // units (ZeRO-2/3's finer units, unit_starts; not under the 3D split or sequence
  // parallelism): told before each unit's parameters are read.
  // scale: the step the block takes as an ODE step (model/gpt_layer_steps.hpp):
  //   x_mid = x + scale proj(attn(ln1(x))),  out = x_mid + scale mlp(ln2(x_mid)),
  // the block itself at 1 (a dense block only); the backward takes the same (cache.scale).
  double forward(const BlockContext& ctx, V2<const T> x, TransformerCache<T>& cache,
                 TransformerRecomputed<T>& recomputed, TransformerGradScratch<T>& scratch, bool again = false,
                 const UnitHooks* units = nullptr, T scale = T(1)) const;
  // The backward in two halves (zero-bubble schedules run them apart).
  // backward_input works in place on the residual-stream gradient: dres holds dL/d(out) on
  // entry and dL/d(x) on return. It accumulates the layer norms' gradients and leaves
  // each linear's output gradient in the cache, in place of a value it no longer reads
  // (out, fch, x_mid, qkv), so the cache holds what backward_weight needs.
  // backward_weight accumulates the four linears' weight and bias gradients from them.
  // Under selective recomputation it reads the GELU output backward_input remade, and
  // under sequence parallelism the output gradients it gathered into the scratch, so it
  // must follow it directly (no other block's backward between). A mixture of experts
  // makes all its gradients in the input half (its weight half has nothing to do);
  // dloss_scale is dL/d(one token's loss), for its auxiliary losses.
  void backward_input(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& cache, TransformerGradScratch<T>& s,
                      TransformerRecomputed<T>& recomputed, T dloss_scale) const;
  void backward_weight(TransformerCache<T>& cache, TransformerRecomputed<T>& recomputed,
                       TransformerGradScratch<T>& s) const;
  // Both halves, one after the other; under the 3D split interleaved, as AxoNN runs them:
  // each linear's weight gradient is multiplied while its input gradient's all-reduce is
  // in flight (the same values as the halves run apart). With units, interleaved too:
  // told before each unit's parameters are read (backwards) and as soon as each unit's
  // gradients are final.
  void backward(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& cache, TransformerGradScratch<T>& s,
                TransformerRecomputed<T>& recomputed, T dloss_scale, const UnitHooks* units = nullptr) const;
  // ZeRO-2/3's finer units, in the order the forward reads them: where each starts in the
  // flat buffers (each runs to the next, the last to the block's end): ln1 + qkv,
  // proj + ln2 (with a mixture's router; the experts lie in their own region), fc,
  // fc_proj (a mixture block: the first two).
  std::vector<int64_t> unit_starts() const;
  const BlockWidths& widths() const { return w_; }
  const MoeLayer<T>* mixture() const { return moe_.get(); }
  // What one forward and backward on ctx sends (comm/traffic.hpp), call for call.
  void traffic(const BlockContext& ctx, Traffic& out) const;
  // The most values its products' bf16 operands hold on the model's ProductWorkspace stack
  // at once, on `rows` local rows (0 unless bf16 products round once in a pass of their
  // own): attention's pass copies, or a product's rounded operands. A mixture's expert
  // products are not counted (their rows follow the routing).
  int64_t product_stack_elements(int64_t rows) const;
  // The forward's part of it (what full recomputation sends again).
  void forward_traffic(const BlockContext& ctx, Traffic& out) const;

 private:
  enum class Linear { Qkv, Proj, Fc, FcProj };
  // backward_input, and with weights each linear's weight gradient right after its input gradient
  void backward_input_and(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& cache, TransformerGradScratch<T>& s,
                          TransformerRecomputed<T>& recomputed, T dloss_scale, bool weights,
                          const UnitHooks* units) const;
  // What the backward does around each linear (transformer_block.cpp): the 3D weight blocks'
  // prefetches, ZeRO-2/3's units, the output gradient rounded to bf16 once for both halves,
  // the weight half right after the input half, the branch gradient kept for a later one.
  struct BackwardPass;
  // the MLP's backward, fc_proj then fc: dres = dL/d(out) to g.dc = dL/d(ln2)
  void mlp_backward(const BackwardPass& b, V2<T> dres, TransformerCache<T>& cache, TransformerGradScratch<T>& s) const;
  // the attention core (fused, ring or all-to-all over the context group): qkv to atty, and back
  void attention_core_forward(const BlockContext& ctx, TransformerCache<T>& cache) const;
  void attention_core_backward(const BlockContext& ctx, TransformerCache<T>& cache, TransformerGradScratch<T>& s) const;
  // one linear's weight and bias gradients from its output gradient dy: what the input
  // half left in the cache, or where it lies while the input half runs (no sequence
  // parallelism)
  // (bias_summed: its bias gradient was added where dy was rounded)
  void weight_gradient(Linear which, TransformerCache<T>& cache, TransformerRecomputed<T>& recomputed,
                       TransformerGradScratch<T>& s, V2<const T> dy, bool bias_summed) const;
  int bias_of(Linear which) const;  // the linear's bias parameter
  // the output gradient of `which` that the input half left in the cache
  V2<const T> kept_gradient(Linear which, const TransformerCache<T>& cache) const;
  ParamStore<T>& store_;
  const TensorParallel& tp_;
  const ContextParallel& cp_;
  ContextWorkspace<T>* context_ws_;
  kernels::ProductPrecision precision_;  // model.precision, model.bf16_round_once, the store's workspace
  bool selective_;                       // parallel.recompute = "selective": fch_gelu goes to `recomputed`
  int64_t c_;                            // the model's hidden size C
  BlockWidths w_;
  int ln1_w_, ln1_b_, qkv_w_, qkv_b_, proj_w_, proj_b_, ln2_w_, ln2_b_, fc_w_ = -1, fc_b_ = -1, fcp_w_ = -1,
                                                                        fcp_b_ = -1;
  std::unique_ptr<MoeLayer<T>> moe_;  // the MLP when it is a mixture of experts
};

}  // namespace strata
