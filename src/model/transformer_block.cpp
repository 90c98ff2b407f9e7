#include "model/transformer_block.hpp"

#include <cmath>

#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace strata {
namespace {
template <class T> V1<T> flat(const Tensor2<T>& t) { return V1<T>(t.data(), t.size()); }
template <class T> V1<T> flat(const V2<T>& t) { return V1<T>(t.data(), t.size()); }
}  // namespace

template <class T>
void TransformerCache<T>::ensure(const BlockContext& ctx, int64_t c, int64_t h) {
  const int64_t n = ctx.rows();
  if (int64_t(out.extent(0)) == n) return;
  ln1 = Tensor2<T>("ln1", n, c);
  ln2 = Tensor2<T>("ln2", n, c);
  ln1_mean = Tensor1<T>("ln1_mean", n);
  ln1_rstd = Tensor1<T>("ln1_rstd", n);
  ln2_mean = Tensor1<T>("ln2_mean", n);
  ln2_rstd = Tensor1<T>("ln2_rstd", n);
  qkv = Tensor2<T>("qkv", n, 3 * c);
  att = kernels::AttentionBuffers<T>(ctx.batch, ctx.seq_len, h, c / h);
  atty = Tensor2<T>("atty", n, c);
  x_mid = Tensor2<T>("x_mid", n, c);
  fch = Tensor2<T>("fch", n, 4 * c);
  fch_gelu = Tensor2<T>("fch_gelu", n, 4 * c);
  out = Tensor2<T>("block_out", n, c);
}

template <class T>
void TransformerGradScratch<T>::ensure(int64_t rows, int64_t c) {
  if (int64_t(dc.extent(0)) == rows) return;
  dqkv = Tensor2<T>("dqkv", rows, 3 * c);
  dc = Tensor2<T>("dc", rows, c);
  dfch = Tensor2<T>("dfch", rows, 4 * c);
}

template <class T>
TransformerBlock<T>::TransformerBlock(ParamStore<T>& store, int layer, int64_t n_layer, int64_t c, int64_t n_head,
                                      double std)
    : store_(store), c_(c), h_(n_head) {
  const std::string p = "blocks." + std::to_string(layer) + ".";
  // Residual projections are scaled by 1/sqrt(2L) (GPT-2), so the stream's variance does
  // not grow with depth.
  const double proj_std = std / std::sqrt(2.0 * double(n_layer));
  ln1_w_ = store.add(p + "ln1.weight", {c}, Init::Ones);
  ln1_b_ = store.add(p + "ln1.bias", {c}, Init::Zeros);
  qkv_w_ = store.add(p + "attn.qkv.weight", {c, 3 * c}, Init::Normal, std, true);
  qkv_b_ = store.add(p + "attn.qkv.bias", {3 * c}, Init::Zeros);
  proj_w_ = store.add(p + "attn.proj.weight", {c, c}, Init::Normal, proj_std, true);
  proj_b_ = store.add(p + "attn.proj.bias", {c}, Init::Zeros);
  ln2_w_ = store.add(p + "ln2.weight", {c}, Init::Ones);
  ln2_b_ = store.add(p + "ln2.bias", {c}, Init::Zeros);
  fc_w_ = store.add(p + "mlp.fc.weight", {c, 4 * c}, Init::Normal, std, true);
  fc_b_ = store.add(p + "mlp.fc.bias", {4 * c}, Init::Zeros);
  fcp_w_ = store.add(p + "mlp.proj.weight", {4 * c, c}, Init::Normal, proj_std, true);
  fcp_b_ = store.add(p + "mlp.proj.bias", {c}, Init::Zeros);
}

template <class T>
void TransformerBlock<T>::forward(const BlockContext& ctx, V2<const T> x, TransformerCache<T>& k) const {
  using namespace kernels;
  const auto& s = store_;
  k.ensure(ctx, c_, h_);
  k.x_in = x;
  // attention branch; x is (BT, C)
  layernorm_forward<T>(k.ln1, k.ln1_mean, k.ln1_rstd, x, s.param(ln1_w_), s.param(ln1_b_));
  matmul_forward<T>(k.qkv, k.ln1, s.param2(qkv_w_), s.param(qkv_b_));              // (BT, 3C)
  attention_forward<T>(k.atty, k.att, k.qkv, ctx.batch, ctx.seq_len, h_);          // (BT, C)
  matmul_forward<T>(k.x_mid, k.atty, s.param2(proj_w_), s.param(proj_b_));         // (BT, C)
  residual_accumulate<T>(flat(k.x_mid), V1<const T>(x.data(), x.size()));          // x_mid = x + proj
  // MLP branch
  layernorm_forward<T>(k.ln2, k.ln2_mean, k.ln2_rstd, k.x_mid, s.param(ln2_w_), s.param(ln2_b_));
  matmul_forward<T>(k.fch, k.ln2, s.param2(fc_w_), s.param(fc_b_));                // (BT, 4C)
  gelu_forward<T>(flat(k.fch_gelu), flat(k.fch));
  matmul_forward<T>(k.out, k.fch_gelu, s.param2(fcp_w_), s.param(fcp_b_));         // (BT, C)
  residual_accumulate<T>(flat(k.out), flat(k.x_mid));                               // out = x_mid + mlp
}

template <class T>
void TransformerBlock<T>::backward(const BlockContext& ctx, V2<T> dres, TransformerCache<T>& k,
                                   TransformerGradScratch<T>& g) const {
  using namespace kernels;
  const auto& s = store_;
  g.ensure(ctx.rows(), c_);
  // MLP branch: dres = dL/d(out) flows into fc_proj, and straight through to x_mid.
  matmul_backward<T>(g.dfch, s.grad2(fcp_w_), s.grad(fcp_b_), dres, k.fch_gelu, s.param2(fcp_w_));
  gelu_backward<T>(flat(g.dfch), flat(k.fch), flat(g.dfch));
  matmul_backward<T>(g.dc, s.grad2(fc_w_), s.grad(fc_b_), g.dfch, k.ln2, s.param2(fc_w_));
  layernorm_backward<T>(dres, s.grad(ln2_w_), s.grad(ln2_b_), g.dc, k.x_mid, s.param(ln2_w_), k.ln2_mean,
                        k.ln2_rstd, true);  // dres is now dL/d(x_mid)
  // attention branch
  matmul_backward<T>(g.dc, s.grad2(proj_w_), s.grad(proj_b_), dres, k.atty, s.param2(proj_w_));
  attention_backward<T>(g.dqkv, k.att, g.dc, ctx.batch, ctx.seq_len, h_);
  matmul_backward<T>(g.dc, s.grad2(qkv_w_), s.grad(qkv_b_), g.dqkv, k.ln1, s.param2(qkv_w_));
  layernorm_backward<T>(dres, s.grad(ln1_w_), s.grad(ln1_b_), g.dc, k.x_in, s.param(ln1_w_), k.ln1_mean,
                        k.ln1_rstd, true);  // dres is now dL/d(x)
}

template struct TransformerCache<float>;
template struct TransformerCache<double>;
template struct TransformerGradScratch<float>;
template struct TransformerGradScratch<double>;
template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace strata
