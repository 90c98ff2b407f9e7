#pragma once
// One pre-LN GPT block:
//   x_mid = x + proj(attn(ln1(x)))
//   x_out = x_mid + fc2(gelu(fc1(ln2(x_mid))))
// Weights are stored [in, out]: qkv [C, 3, C] (the q | k | v blocks, i.e. [C, 3C] in
// memory), proj [C, C], fc [C, 4C], fc_proj [4C, C]. Under a tensor split each rank holds
// shards (model/tensor_shard.hpp) and runs the layers of parallel/tp_layers.hpp; attention
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
#include "model/param_store.hpp"
#include "model/product_operand.hpp"
#include "model/unit_hooks.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/context_workspace.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

// A block's local widths: C' the hidden block (C, or C/q in 2D), A its heads' width (C,
// C/t, C/q), F the MLP width (4C, 4C/t, 4C/q), and its number of local heads; the
// element its product-only activations are kept in (bf16_operands: bf16, else T); and
// row_split, how many ways sequence parallelism splits the rows of the residual stream
// and the layer norms (t, else 1).
// moe: the MLP is a mixture of experts (model/moe_layer.hpp; its activations are in the
// cache's MoeCache, and ln2 is kept in T: the router reads it).
struct BlockWidths {
  int64_t c = 0, a = 0, f = 0, heads = 0;
  bool bf16_operands = false;
  int64_t row_split = 1;
  bool moe = false;
  int64_t weight_block = 0;  // 3D: values of the largest weight block a linear gathers (else 0)
};

// What a block with a mixture of experts for its MLP needs besides its sizes.
struct MixtureSetup {
  ModelConfig cfg;  // moe_* keys, n_embd
  ExpertParallel ep;
  TokenPlace place;
};

// Whether a block keeps the activations that only feed its products (the layer norms' and
// the GELU's outputs: ProductOperand) as bf16, written rounded by their kernels: in bf16
// with model.bf16_round_once, where products round their operands in a pass of their own
// (oneDNN on CPUs: kernels::RoundedCopy::pays()), and not under the 2D split (its SUMMA
// broadcasts the operands' blocks in T) or sequence parallelism (its all-gathers move the
// layer norms' outputs in T).
bool keeps_bf16_operands(Precision precision, bool round_once, const TensorParallel& tp);

// Activations one forward keeps for its backward; one per micro-batch in flight.
template <class T>
struct TransformerCache {
  V2<const T> x_in;  // (BT', C) the block's input, owned by the caller
  // Local sizes: BT rows (2D: this batch block's), BT' those of the residual stream and
  // the layer norms (BT / t under sequence parallelism, else BT), C' the local hidden
  // block (C, or C/q in 2D), A the local heads' width (C, C/t, C/q), F the local MLP width
  // (4C, 4C/t, 4C/q).
  ProductOperand<T> ln1, ln2;                         // (BT', C'), T or bf16 (BlockWidths::bf16_operands)
  Tensor1<T> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // (BT')
  Tensor2<T> qkv;                                     // (BT, 3A)
  Tensor2<T> lse;                                     // (B*H', T) attention's row logsumexps (kernels/attention.hpp)
  Tensor2<T> atty;                                    // (BT, A) attention output before proj
  Tensor2<T> x_mid;                                   // (BT', C') residual after attention
  Tensor2<T> fch;                                     // (BT, F)
  ProductOperand<T> fch_gelu;                         // (BT, F), T or bf16
  Tensor2<T> out;                                     // (BT', C') block output
  MoeCache<T> moe;                                    // a mixture-of-experts block's MLP (fch, fch_gelu empty)
  T scale = T(1);  // the step the forward took: each branch's output scaled by it (layer-parallel coarse steps)
  // keep_recomputable = false (parallel.recompute = "selective"): fch_gelu is left
  // empty; the block uses the model's TransformerRecomputed instead.
  void ensure(const BlockContext& ctx, const BlockWidths& w, bool keep_recomputable = true);
  // What bytes() comes to after ensure(ctx, w, keep_recomputable).
  static int64_t bytes_for(const BlockContext& ctx, const BlockWidths& w, bool keep_recomputable = true);
  // Every buffer with its shape (core/tensor.hpp: AllocateEach, CountBytes).
  template <class Each>
  void buffers(const BlockContext& ctx, const BlockWidths& w, bool keep_recomputable, Each&& each) {
    const int64_t n = ctx.rows(), stream = n / w.row_split, mlp = w.moe ? 0 : 1, kept = keep_recomputable ? mlp : 0;
    ln1.buffers("ln1", stream, w.c, w.bf16_operands, each);
    ln2.buffers("ln2", stream, w.c, w.bf16_operands && !w.moe, each);
    each(ln1_mean, "ln1_mean", stream);
    each(ln1_rstd, "ln1_rstd", stream);
    each(ln2_mean, "ln2_mean", stream);
    each(ln2_rstd, "ln2_rstd", stream);
    each(qkv, "qkv", n, 3 * w.a);
    each(lse, "att.lse", ctx.batch * w.heads, ctx.seq_len);
    each(atty, "atty", n, w.a);
    each(x_mid, "x_mid", stream, w.c);
    each(fch, "fch", mlp * n, w.f);
    fch_gelu.buffers("fch_gelu", kept * n, w.f, w.bf16_operands, each);
    each(out, "block_out", stream, w.c);
  }
  int64_t bytes() const {
    return ln1.bytes() + ln2.bytes() + fch_gelu.bytes() + moe.bytes() +
           view_bytes(ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, qkv, lse, atty, x_mid, fch, out);
  }
};

// Selective recomputation: the GELU output, made in each block's forward and remade from
// fch in its backward, in one copy for all blocks of a model (used one block at a time).
// It is the largest activation that costs nothing to remake (one elementwise pass). The
// fused attention keeps no probabilities, only its output and a logsumexp per row, which
// the backward needs and which only a second attention forward could remake; so there is
// nothing left in attention worth recomputing, and "selective" recomputes the GELU only.
template <class T>
struct TransformerRecomputed {
  ProductOperand<T> fch_gelu;  // (BT, F), T or bf16
  void ensure(const BlockContext& ctx, const BlockWidths& w);
  static int64_t bytes_for(const BlockContext& ctx, const BlockWidths& w);  // bytes() after ensure(ctx, w)
  int64_t bytes() const { return fch_gelu.bytes(); }
  template <class Each>
  void buffers(const BlockContext& ctx, const BlockWidths& w, Each&& each) {
    fch_gelu.buffers("fch_gelu", ctx.rows(), w.f, w.bf16_operands, each);
  }
};

// Gradient scratch shared by all blocks of a model (used one block at a time). Under
// sequence parallelism also the (BT, C) buffers its gathers and reduce-scatters go
// through: `rows` (a layer norm's output gathered, a partial product reduced), and the
// two out-linears' output gradients gathered by a block's input half for its weight half.
template <class T>
struct TransformerGradScratch {
  Tensor2<T> dqkv;                   // (BT, 3A)
  Tensor2<T> dc, da;                 // (BT', C'), (BT, A)
  Tensor2<T> dfch;                   // (BT, F)
  Tensor2<T> rows, dy_mlp, dy_attn;  // (BT, C) under sequence parallelism, else empty
  // 3D: two linears' weight blocks gathered over depth (one in use, the next one's on its
  // way) and two weight-gradient blocks (one being reduce-scattered), which `transfers`
  // (parallel/tp3d_transfers.hpp) keeps in flight
  Tensor1<T> gathered0, gathered1, grad_block0, grad_block1;
  Linear3DTransfers<T> transfers;
  void ensure(int64_t rows, const BlockWidths& w);
  static int64_t bytes_for(int64_t rows, const BlockWidths& w);  // bytes() after ensure(rows, w)
  int64_t bytes() const {
    return view_bytes(dqkv, dc, da, dfch, rows, dy_mlp, dy_attn, gathered0, gathered1, grad_block0, grad_block1);
  }
  template <class Each>
  void buffers(int64_t n, const BlockWidths& w, Each&& each) {
    const int64_t gathered = w.row_split > 1 ? n : 0;
    each(dqkv, "dqkv", n, 3 * w.a);
    each(dc, "dc", n / w.row_split, w.c);
    each(da, "da", n, w.a);
    each(dfch, "dfch", n, w.f);
    each(rows, "sp.rows", gathered, w.c);
    each(dy_mlp, "sp.dy_mlp", gathered, w.c);
    each(dy_attn, "sp.dy_attn", gathered, w.c);
    each(gathered0, "3d.gathered0", w.weight_block);
    each(gathered1, "3d.gathered1", w.weight_block);
    each(grad_block0, "3d.grad_block0", w.weight_block);
    each(grad_block1, "3d.grad_block1", w.weight_block);
  }
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
