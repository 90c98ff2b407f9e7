#include "model/lm_head.hpp"

#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"

namespace strata {

template <class T>
void LMHeadCache<T>::ensure(int64_t rows, int64_t c, int64_t v) {
  if (int64_t(lnf.extent(0)) == rows) return;
  lnf = Tensor2<T>("lnf", rows, c);
  lnf_mean = Tensor1<T>("lnf_mean", rows);
  lnf_rstd = Tensor1<T>("lnf_rstd", rows);
  logits = Tensor2<T>("logits", rows, v);
  lse = Tensor1<T>("lse", rows);
  losses = Tensor1<T>("losses", rows);
}

template <class T>
LMHead<T>::LMHead(ParamStore<T>& store, int wte_index, int64_t c) : store_(store), wte_(wte_index), c_(c) {
  lnf_w_ = store.add("lnf.weight", {c}, Init::Ones);
  lnf_b_ = store.add("lnf.bias", {c}, Init::Zeros);
}

template <class T>
double LMHead<T>::forward(const BlockContext& ctx, V2<const T> x, V1<const int32_t> targets,
                          LMHeadCache<T>& k) const {
  using namespace kernels;
  const auto& s = store_;
  const auto wte = s.param2(wte_);  // (V, C)
  k.ensure(ctx.rows(), c_, wte.extent(0));
  k.x_in = x;
  k.targets = targets;
  layernorm_forward<T>(k.lnf, k.lnf_mean, k.lnf_rstd, x, s.param(lnf_w_), s.param(lnf_b_));
  gemm<T>("N", "T", T(1), k.lnf, wte, T(0), k.logits);  // (BT, C)(C, V) -> (BT, V)
  return cross_entropy_forward<T>(k.losses, k.lse, k.logits, targets);
}

template <class T>
void LMHead<T>::backward(const BlockContext& ctx, T dloss_scale, V2<T> dx, LMHeadCache<T>& k) const {
  using namespace kernels;
  const auto& s = store_;
  (void)ctx;
  cross_entropy_backward<T>(k.logits, k.logits, k.lse, k.targets, dloss_scale);  // logits := dlogits
  gemm<T>("T", "N", T(1), k.logits, k.lnf, T(1), s.grad2(wte_));    // dwte += dlogits^T lnf  (V, C)
  gemm<T>("N", "N", T(1), k.logits, s.param2(wte_), T(0), k.lnf);   // dlnf = dlogits wte, over lnf
  layernorm_backward<T>(dx, s.grad(lnf_w_), s.grad(lnf_b_), k.lnf, k.x_in, s.param(lnf_w_), k.lnf_mean,
                        k.lnf_rstd, false);
}

template struct LMHeadCache<float>;
template struct LMHeadCache<double>;
template class LMHead<float>;
template class LMHead<double>;

}  // namespace strata
