#pragma once
// A transformer block's local widths and the buffers it keeps: the activations one forward
// keeps for its backward (TransformerCache), selective recomputation's (TransformerRecomputed)
// and the gradient scratch its blocks share (TransformerGradScratch); each with its bytes
// for the planner. The block itself: model/transformer_block.hpp.
#include <cstdint>

#include "core/deck_choices.hpp"
#include "core/tensor.hpp"
#include "kernels/product_operand.hpp"
#include "model/block_context.hpp"
#include "model/moe_layer.hpp"
#include "parallel/tensor_parallel.hpp"
#include "parallel/tp3d_transfers.hpp"

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
  kernels::ProductOperand<T> ln1, ln2;                // (BT', C'), T or bf16 (BlockWidths::bf16_operands)
  Tensor1<T> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // (BT')
  Tensor2<T> qkv;                                     // (BT, 3A)
  Tensor2<T> lse;                                     // (B*H', T) attention's row logsumexps (kernels/attention.hpp)
  Tensor2<T> atty;                                    // (BT, A) attention output before proj
  Tensor2<T> x_mid;                                   // (BT', C') residual after attention
  Tensor2<T> fch;                                     // (BT, F)
  kernels::ProductOperand<T> fch_gelu;                // (BT, F), T or bf16
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
  kernels::ProductOperand<T> fch_gelu;  // (BT, F), T or bf16
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

}  // namespace strata
