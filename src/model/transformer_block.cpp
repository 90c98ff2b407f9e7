#include "model/transformer_block.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "kernels/column_sums.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/residual.hpp"
#include "parallel/all_to_all_attention.hpp"
#include "parallel/ring_attention.hpp"
#include "parallel/tp_layers.hpp"
#include "state/tensor_shard.hpp"

namespace strata {
namespace {
template <class T>
V1<T> flat(const Tensor2<T>& t) {
  return V1<T>(t.data(), t.size());
}
template <class T>
V1<T> flat(const V2<T>& t) {
  return V1<T>(t.data(), t.size());
}
}  // namespace

template <class T>
TransformerBlock<T>::TransformerBlock(ParamStore<T>& store, const TensorParallel& tp, const ContextParallel& cp,
                                      Precision precision, bool round_once, Recompute recompute, int layer,
                                      int64_t n_layer, int64_t c, int64_t n_head, double std, bool held,
                                      const MixtureSetup* mixture, ContextWorkspace<T>* context_workspace)
    : store_(store), tp_(tp), cp_(cp), context_ws_(context_workspace),
      precision_(store.product_precision(precision, round_once)), selective_(recompute == Recompute::Selective), c_(c) {
  if (cp.active() && !context_workspace) throw std::logic_error("TransformerBlock: a context split needs a workspace");
  const std::string p = "blocks." + std::to_string(layer) + ".";
  // Residual projections are scaled by 1/sqrt(2L) (GPT-2), so the stream's variance does
  // not grow with depth.
  const double proj_std = std / std::sqrt(2.0 * double(n_layer));
  // add(name, shape, init, std, decay, split: 1D dim, 2D row dim, 2D column dim, 3D)
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, Init init, double sd, bool decay,
                       int dim_1d, int row_dim, int col_dim, Split3D three_d) {
    const Shard sh = held ? tensor_shard(tp, shape, dim_1d, row_dim, col_dim, three_d) : not_held(shape);
    return store.add(p + name, shape, init, sd, decay, sh);
  };
  // 3D: the residual stream's width over X, the heads and hidden units over Y; an "in"
  // linear's rows (input) over X x depth, an "out" linear's over Y x depth
  const Split3D stream{0, -1, -1}, in_bias{-1, 0, -1}, out_bias{0, -1, -1};
  ln1_w_ = add("ln1.weight", {c}, Init::Ones, 0, false, -1, -1, 0, stream);
  ln1_b_ = add("ln1.bias", {c}, Init::Zeros, 0, false, -1, -1, 0, stream);
  qkv_w_ = add("attn.qkv.weight", {c, 3, c}, Init::Normal, std, true, 2, 0, 2, {0, 2, 0});  // column-parallel (1D)
  qkv_b_ = add("attn.qkv.bias", {3, c}, Init::Zeros, 0, false, 1, -1, 1, {-1, 1, -1});
  proj_w_ = add("attn.proj.weight", {c, c}, Init::Normal, proj_std, true, 0, 0, 1, {1, 0, 0});  // row-parallel (1D)
  proj_b_ = add("attn.proj.bias", {c}, Init::Zeros, 0, false, -1, -1, 0, out_bias);
  ln2_w_ = add("ln2.weight", {c}, Init::Ones, 0, false, -1, -1, 0, stream);
  ln2_b_ = add("ln2.bias", {c}, Init::Zeros, 0, false, -1, -1, 0, stream);
  if (mixture) {
    moe_ = std::make_unique<MoeLayer<T>>(store, tp, mixture->ep, mixture->place, mixture->cfg, precision_, p, std,
                                         proj_std, held);
  } else {
    fc_w_ = add("mlp.fc.weight", {c, 4 * c}, Init::Normal, std, true, 1, 0, 1, {0, 1, 0});
    fc_b_ = add("mlp.fc.bias", {4 * c}, Init::Zeros, 0, false, 0, -1, 0, in_bias);
    fcp_w_ = add("mlp.proj.weight", {4 * c, c}, Init::Normal, proj_std, true, 0, 0, 1, {1, 0, 0});
    fcp_b_ = add("mlp.proj.bias", {c}, Init::Zeros, 0, false, -1, -1, 0, out_bias);
  }
  const auto& info = store.infos();
  w_.c = info[ln1_w_].count[0];
  w_.a = info[qkv_b_].count[1];
  w_.f = moe_ ? 4 * c / tp.size()
              : info[fc_b_].count[0];  // a mixture block: the dense width the shared scratch is sized by
  w_.moe = bool(moe_);
  w_.heads = n_head * w_.a / c;  // 0 where not held
  w_.bf16_operands = std::is_same_v<T, float> && keeps_bf16_operands(precision, round_once, tp);
  w_.row_split = tp.row_split();
  if (tp.traits().gathers_weight_blocks && held) w_.weight_block = w_.c * std::max(3 * w_.a, w_.f);
}

template <class T>
double TransformerBlock<T>::forward(const BlockContext& ctx, V2<const T> x, TransformerCache<T>& k,
                                    TransformerRecomputed<T>& recomputed, TransformerGradScratch<T>& g, bool again,
                                    const UnitHooks* units, T scale) const {
  using namespace kernels;
  const auto unit = [&] {  // ZeRO-2/3's finer units: ln1 + qkv, proj + ln2, fc, fc_proj
    if (units) units->step();
  };
  const auto& s = store_;
  const auto& tp = tp_;
  const bool keep = !selective_;
  k.ensure(ctx, w_, keep);
  if (!keep && !moe_) recomputed.ensure(ctx, w_);
  if (w_.row_split > 1 || w_.weight_block > 0) g.ensure(ctx.rows(), w_);
  const V2<T> rows = g.rows;  // sequence parallelism's gathers and reduce-scatters (else empty)
  // 3D: each linear's weight block gathered over depth while the linear before it runs
  Linear3DTransfers<T>* const block = w_.weight_block > 0 ? &g.transfers : nullptr;
  const auto prefetch = [&](bool in_linear, int w) {
    if (block) block->prefetch(tp.weight_block_groups(in_linear), s.param(w));
  };
  auto& fch_gelu = keep ? k.fch_gelu : recomputed.fch_gelu;
  if (scale != T(1) && moe_) throw std::logic_error("TransformerBlock: a scaled step of a mixture-of-experts block");
  k.x_in = x;
  k.scale = scale;
  const auto add_branch = [&](Tensor2<T>& branch, V1<const T> stream) {  // branch := stream + scale branch
    if (scale == T(1))
      residual_accumulate<T>(flat(branch), stream);
    else
      residual_accumulate_scaled<T>(flat(branch), stream, scale);
  };
  // attention branch; x is (BT, C'). ln1, ln2 and the GELU output only feed products: T, or
  // bf16 written rounded (ProductOperand).
  prefetch(true, qkv_w_);
  unit();
  k.ln1.write([&](auto ln1) {
    tp_layernorm_forward<T>(tp, c_, ln1, k.ln1_mean, k.ln1_rstd, x, s.param(ln1_w_), s.param(ln1_b_));
  });
  prefetch(false, proj_w_);
  k.ln1.read([&](auto ln1) {
    tp_linear_in_forward<T>(tp, precision_, k.qkv, ln1, s.param2(qkv_w_), s.param(qkv_b_), rows, block);
  });  // (BT, 3A)
  attention_core_forward(ctx, k);  // (BT, A)
  if (!moe_) prefetch(true, fc_w_);
  unit();
  tp_linear_out_forward<T>(tp, precision_, k.x_mid, k.atty, s.param2(proj_w_), s.param(proj_b_), rows,
                           block);                       // (BT', C')
  add_branch(k.x_mid, V1<const T>(x.data(), x.size()));  // x_mid = x + proj
  // MLP branch
  k.ln2.write([&](auto ln2) {
    tp_layernorm_forward<T>(tp, c_, ln2, k.ln2_mean, k.ln2_rstd, k.x_mid, s.param(ln2_w_), s.param(ln2_b_));
  });
  if (moe_) {
    const double aux = moe_->forward(ctx, k.ln2.values, k.out, k.moe, !again);
    residual_accumulate<T>(flat(k.out), flat(k.x_mid));  // out = x_mid + moe
    if (block) block->finish();
    return aux;
  }
  prefetch(false, fcp_w_);
  unit();
  k.ln2.read([&](auto ln2) {
    tp_linear_in_forward<T>(tp, precision_, k.fch, ln2, s.param2(fc_w_), s.param(fc_b_), rows, block);
  });  // (BT, F)
  fch_gelu.write([&](auto g) { gelu_forward<T>(flat(g), flat(k.fch)); });
  unit();
  fch_gelu.read([&](auto h) {
    tp_linear_out_forward<T>(tp, precision_, k.out, h, s.param2(fcp_w_), s.param(fcp_b_), rows, block);
  });                                // (BT', C')
  add_branch(k.out, flat(k.x_mid));  // out = x_mid + mlp
  if (block) block->finish();
  return 0.0;
}

template <class T>
void TransformerBlock<T>::backward_input(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& k,
                                         TransformerGradScratch<T>& g, TransformerRecomputed<T>& recomputed,
                                         T dloss_scale) const {
  backward_input_and(ctx, dres, k, g, recomputed, dloss_scale, false, nullptr);
}

template <class T>
void TransformerBlock<T>::backward(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& k,
                                   TransformerGradScratch<T>& g, TransformerRecomputed<T>& recomputed, T dloss_scale,
                                   const UnitHooks* units) const {
  // each linear's weight gradient right after its input gradient: 3D, its weight gradient
  // under its input gradient's sum; ZeRO-2/3's finer units, each unit final in turn; bf16
  // products that round in a pass of their own, its output gradient rounded once for both
  // (the same sums in the same order per gradient either way: the same bits)
  if (w_.weight_block > 0 || units || w_.bf16_operands) {
    backward_input_and(ctx, dres, k, g, recomputed, dloss_scale, true, units);
    return;
  }
  backward_input(ctx, dres, k, g, recomputed, dloss_scale);
  backward_weight(k, recomputed, g);
}

template <class T>
struct TransformerBlock<T>::BackwardPass {
  const TransformerBlock& block;
  TransformerCache<T>& k;
  TransformerGradScratch<T>& g;
  TransformerRecomputed<T>& recomputed;
  bool weights;                    // each linear's weight gradient right after its input gradient
  const UnitHooks* units;          // ZeRO-2/3's finer units, backwards: fc_proj, fc, proj + ln2, ln1 + qkv
  Linear3DTransfers<T>* transfers;  // 3D: each linear's weight block gathered while the one after it runs
  // an out-linear's output gradient is read where it lies (no copy) where the weight
  // gradient follows at once, unscaled, and the stream is this rank's rows as the products
  // read them (bf16 operands kept: 1D)
  bool read_in_place;

  void prefetch(bool in_linear, int w) const {
    if (transfers) transfers->prefetch(block.tp_.weight_block_groups(in_linear), block.store_.param(w));
  }
  void unit() const {
    if (units) units->step();
  }
  void done(int u) const {
    if (units) units->done(u);
  }
  // a linear's output gradient, which its input product and (with `weights`) its weight
  // product both read: rounded to bf16 once for the two, where products round in a pass of
  // their own and both multiply this rank's rows as they lie (bf16_operands); the copy
  // written in the pass that adds dy's column sums to the linear's bias gradient
  std::unique_ptr<kernels::RoundedCopy> rounded_for_both(Linear which, V2<const T> dy) const {
    auto copy = weights && block.w_.bf16_operands
                    ? kernels::round_for_pass(block.precision_, dy.data(), int64_t(dy.size()))
                    : nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (copy) kernels::add_column_sums_rounding<T>(block.store_.grad(block.bias_of(which)), dy, copy->fill());
    return copy;
  }
  // an out-linear's input gradient dy -> dx (its gathered output gradient in `gathered`), then its weight half
  void out_linear(Linear which, int w, V2<const T> dy, V2<T> dx, V2<T> gathered) const {
    const auto rounded = rounded_for_both(which, dy);
    tp_linear_out_backward_input<T>(block.tp_, block.precision_, dx, dy, block.store_.param2(w), gathered,
                                             transfers);
    weight(which, dy, rounded != nullptr);
  }
  // an in-linear's input gradient dy -> dx (sequence parallelism's sum in g.rows), then its weight half
  void in_linear(Linear which, int w, V2<const T> dy, V2<T> dx) const {
    const auto rounded = rounded_for_both(which, dy);
    tp_linear_in_backward_input<T>(block.tp_, block.precision_, dx, dy, block.store_.param2(w), g.rows,
                                            transfers);
    weight(which, dy, rounded != nullptr);
  }
  void weight(Linear which, V2<const T> dy, bool bias_summed) const {
    if (!weights) return;
    block.weight_gradient(which, k, recomputed, g, dy, bias_summed);
    if (transfers) transfers->input_sum();
  }
  // an out-linear's output gradient: the stream's gradient, times the step the forward
  // took, kept in place of a value no longer read, for a weight half that runs later
  V2<const T> branch_gradient(Tensor2<T>& kept, V2<T> dstream) const {
    if (read_in_place) return dstream;
    if (k.scale == T(1))
      Kokkos::deep_copy(kept, dstream);
    else
      kernels::scaled_copy<T>(flat(kept), V1<const T>(dstream.data(), dstream.size()), k.scale);
    return kept;
  }
};

// Each linear's output gradient goes where a value the backward no longer reads was (out,
// fch, x_mid, qkv), for backward_weight; the layer norms' gains and biases get their
// gradients here. Under sequence parallelism the weight half reads the gathered gradients
// in the scratch.
template <class T>
void TransformerBlock<T>::backward_input_and(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& k,
                                             TransformerGradScratch<T>& g, TransformerRecomputed<T>& recomputed,
                                             T dloss_scale, bool weights, const UnitHooks* units) const {
  using namespace kernels;
  const auto& s = store_;
  g.ensure(ctx.rows(), w_);
  if (selective_ && !moe_) {  // remade from what the cache kept, with the forward's kernel: the same values
    recomputed.ensure(ctx, w_);
    recomputed.fch_gelu.write([&](auto g) { gelu_forward<T>(flat(g), flat(k.fch)); });
  }
  Linear3DTransfers<T>* const transfers = w_.weight_block > 0 ? &g.transfers : nullptr;
  if (transfers) transfers->input_sums_in_flight(weights);
  const BackwardPass b{*this, k, g, recomputed, weights, units, transfers,
                       weights && w_.bf16_operands && k.scale == T(1)};
  b.unit();    // (a mixture's: proj + ln2 with the experts)
  if (moe_) {  // all of the mixture's gradients: dc = dL/d(ln2) (3D: under the gather of proj's block)
    b.prefetch(false, proj_w_);
    moe_->backward(k.ln2.values, dres, g.dc, dloss_scale, k.moe);
  } else {
    mlp_backward(b, dres, k, g);
  }
  tp_layernorm_backward<T>(tp_, c_, dres, s.grad(ln2_w_), s.grad(ln2_b_), g.dc, k.x_mid, s.param(ln2_w_), k.ln2_mean,
                           k.ln2_rstd, true);  // dres is now dL/d(x_mid)
  // attention branch
  const V2<const T> dy_attn = b.branch_gradient(k.x_mid, dres);
  b.prefetch(true, qkv_w_);
  b.out_linear(Linear::Proj, proj_w_, dy_attn, g.da, g.dy_attn);
  b.done(1);
  b.unit();
  attention_core_backward(ctx, k, g);
  if (!b.read_in_place) Kokkos::deep_copy(k.qkv, g.dqkv);
  b.in_linear(Linear::Qkv, qkv_w_, b.read_in_place ? V2<const T>(g.dqkv) : V2<const T>(k.qkv), g.dc);
  tp_layernorm_backward<T>(tp_, c_, dres, s.grad(ln1_w_), s.grad(ln1_b_), g.dc, k.x_in, s.param(ln1_w_), k.ln1_mean,
                           k.ln1_rstd, true);  // dres is now dL/d(x)
  b.done(0);
  if (transfers) {
    transfers->finish();
    transfers->input_sums_in_flight(false);
  }
}

// dres = dL/d(out) flows into fc_proj, and straight through to x_mid.
template <class T>
void TransformerBlock<T>::mlp_backward(const BackwardPass& b, V2<T> dres, TransformerCache<T>& k,
                                       TransformerGradScratch<T>& g) const {
  b.prefetch(false, fcp_w_);
  const V2<const T> dy_mlp = b.branch_gradient(k.out, dres);
  b.prefetch(true, fc_w_);
  b.out_linear(Linear::FcProj, fcp_w_, dy_mlp, g.dfch, g.dy_mlp);
  b.done(3);
  kernels::gelu_backward<T>(flat(k.fch), flat(k.fch), flat(g.dfch));  // fch := dL/d(fch), element by element
  b.prefetch(false, proj_w_);
  b.unit();
  b.in_linear(Linear::Fc, fc_w_, k.fch, g.dc);
  b.done(2);
  b.unit();
}

template <class T>
void TransformerBlock<T>::attention_core_forward(const BlockContext& ctx, TransformerCache<T>& k) const {
  if (cp_.active() && cp_.all_to_all)
    all_to_all_attention_forward<T>(cp_, *context_ws_, k.atty, k.lse, k.qkv, ctx.batch, ctx.seq_len, w_.heads,
                                    precision_);
  else if (cp_.active())
    ring_attention_forward<T>(cp_, *context_ws_, k.atty, k.lse, k.qkv, ctx.batch, ctx.seq_len, w_.heads, precision_);
  else
    kernels::attention_forward<T>(k.atty, k.lse, k.qkv, ctx.batch, ctx.seq_len, w_.heads, precision_);
}

template <class T>
void TransformerBlock<T>::attention_core_backward(const BlockContext& ctx, TransformerCache<T>& k,
                                                  TransformerGradScratch<T>& g) const {
  if (cp_.active() && cp_.all_to_all)
    all_to_all_attention_backward<T>(cp_, *context_ws_, g.dqkv, k.qkv, k.atty, k.lse, g.da, ctx.batch, ctx.seq_len,
                                     w_.heads, precision_);
  else if (cp_.active())
    ring_attention_backward<T>(cp_, *context_ws_, g.dqkv, k.qkv, k.atty, k.lse, g.da, ctx.batch, ctx.seq_len, w_.heads,
                               precision_);
  else
    kernels::attention_backward<T>(g.dqkv, k.qkv, k.atty, k.lse, g.da, ctx.batch, ctx.seq_len, w_.heads, precision_);
}

template <class T>
int TransformerBlock<T>::bias_of(Linear which) const {
  switch (which) {
    case Linear::FcProj:
      return fcp_b_;
    case Linear::Fc:
      return fc_b_;
    case Linear::Proj:
      return proj_b_;
    case Linear::Qkv:
      break;
  }
  return qkv_b_;
}

template <class T>
V2<const T> TransformerBlock<T>::kept_gradient(Linear which, const TransformerCache<T>& k) const {
  switch (which) {
    case Linear::FcProj:
      return k.out;
    case Linear::Fc:
      return k.fch;
    case Linear::Proj:
      return k.x_mid;
    case Linear::Qkv:
      break;
  }
  return k.qkv;
}

template <class T>
void TransformerBlock<T>::weight_gradient(Linear which, TransformerCache<T>& k, TransformerRecomputed<T>& recomputed,
                                          TransformerGradScratch<T>& g, V2<const T> dy, bool bias_summed) const {
  const auto& s = store_;
  const auto& tp = tp_;
  Linear3DTransfers<T>* const block = w_.weight_block > 0 ? &g.transfers : nullptr;
  const V1<T> db = bias_summed ? V1<T>() : s.grad(bias_of(which));
  switch (which) {
    case Linear::FcProj:
      (selective_ ? recomputed.fch_gelu : k.fch_gelu).read([&](auto h) {
        tp_linear_backward_weight<T>(tp, precision_, s.grad2(fcp_w_), db, dy, h, block);
      });
      return;
    case Linear::Fc:
      k.ln2.read([&](auto ln2) { tp_linear_backward_weight<T>(tp, precision_, s.grad2(fc_w_), db, dy, ln2, block); });
      return;
    case Linear::Proj:
      tp_linear_backward_weight<T>(tp, precision_, s.grad2(proj_w_), db, dy, k.atty, block);
      return;
    case Linear::Qkv:
      k.ln1.read([&](auto ln1) { tp_linear_backward_weight<T>(tp, precision_, s.grad2(qkv_w_), db, dy, ln1, block); });
      return;
  }
}

template <class T>
void TransformerBlock<T>::backward_weight(TransformerCache<T>& k, TransformerRecomputed<T>& recomputed,
                                          TransformerGradScratch<T>& g) const {
  const auto& s = store_;
  const auto& tp = tp_;
  const auto& fch_gelu = selective_ ? recomputed.fch_gelu : k.fch_gelu;
  // (a mixture's gradients were made in the input half)
  if (w_.row_split > 1) {  // every row: the out-linears' gathered gradients, the layer norms' outputs gathered again
    if (!moe_) {
      fch_gelu.read(
          [&](auto h) { tp_linear_backward_weight<T>(tp, precision_, s.grad2(fcp_w_), s.grad(fcp_b_), g.dy_mlp, h); });
      tp_gather_rows<T>(tp, g.rows, k.ln2.values);
      tp_linear_backward_weight<T>(tp, precision_, s.grad2(fc_w_), s.grad(fc_b_), k.fch, g.rows);
    }
    tp_linear_backward_weight<T>(tp, precision_, s.grad2(proj_w_), s.grad(proj_b_), g.dy_attn, k.atty);
    tp_gather_rows<T>(tp, g.rows, k.ln1.values);
    tp_linear_backward_weight<T>(tp, precision_, s.grad2(qkv_w_), s.grad(qkv_b_), k.qkv, g.rows);
    return;
  }
  // 3D: each weight gradient's reduce-scatter over depth in flight under the next product
  if (!moe_) {
    for (const Linear which : {Linear::FcProj, Linear::Fc})
      weight_gradient(which, k, recomputed, g, kept_gradient(which, k), false);
  }
  for (const Linear which : {Linear::Proj, Linear::Qkv})
    weight_gradient(which, k, recomputed, g, kept_gradient(which, k), false);
  if (w_.weight_block > 0) g.transfers.finish();
}

template <class T>
std::vector<int64_t> TransformerBlock<T>::unit_starts() const {
  const auto& info = store_.infos();
  std::vector<int64_t> starts = {info[size_t(ln1_w_)].offset, info[size_t(proj_w_)].offset};
  if (!moe_) starts.insert(starts.end(), {info[size_t(fc_w_)].offset, info[size_t(fcp_w_)].offset});
  return starts;
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;
// (the CUDA build's unity build may put this file's footprint file after it in one unit,
// where the class's instantiation above covers the members defined there)
#define STRATA_TRANSFORMER_BLOCK_INSTANTIATED

}  // namespace strata
