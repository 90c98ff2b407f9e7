#include "model/softmax_regression.hpp"

#include "kernels/cross_entropy.hpp"
#include "kernels/matmul.hpp"

namespace strata {

template <class T>
SoftmaxRegression<T>::SoftmaxRegression(const SoftmaxRegressionConfig& cfg, uint64_t seed)
    : cfg_(cfg), placement_(StagePlacement::balanced(1, 1, 0)), products_(store_.product_precision(cfg.precision)) {
  weight_ = store_.add("weight", {cfg.inputs, cfg.classes}, Init::Normal, cfg.init_std, true);
  bias_ = store_.add("bias", {cfg.classes}, Init::Zeros, 0, false);
  store_.allocate(seed);
}

template <class T>
double SoftmaxRegression<T>::forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T>,
                                     StageCache& cache) {
  auto& a = static_cast<SoftmaxActivations<T>&>(cache);
  const int64_t b = ctx.batch;
  a.features = batch.features;
  a.labels = batch.targets;
  ensure_extents(a.logits, "softmax.logits", b, cfg_.classes);
  ensure_extents(a.lse, "softmax.lse", b);
  ensure_extents(a.losses, "softmax.losses", b);
  kernels::matmul_forward<T>(a.logits, a.features, store_.param2(weight_), store_.param(bias_), products_);
  const double loss = kernels::cross_entropy_forward<T>(a.losses, a.lse, a.logits, a.labels);
  a.correct = kernels::count_correct<T>(a.logits, a.labels);
  return loss;
}

template <class T>
V2<const T> SoftmaxRegression<T>::output(const StageCache& cache) const {
  return static_cast<const SoftmaxActivations<T>&>(cache).logits;
}

template <class T>
void SoftmaxRegression<T>::backward_input(const BlockContext&, T dloss_scale, V2<const T>, StageCache& cache) {
  auto& a = static_cast<SoftmaxActivations<T>&>(cache);
  kernels::cross_entropy_backward<T>(a.logits, a.logits, a.lse, a.labels, dloss_scale, 0);  // logits := dlogits
}

template <class T>
void SoftmaxRegression<T>::backward_weight(const BlockContext&, StageCache& cache, const GradReadyFn& on_ready) {
  auto& a = static_cast<SoftmaxActivations<T>&>(cache);
  kernels::matmul_backward_weight<T>(store_.grad2(weight_), store_.grad(bias_), a.logits, a.features, products_);
  const auto [begin, end] = grad_ready_order().front();
  if (on_ready) on_ready(begin, end - begin);
}

template <class T>
std::vector<std::pair<int64_t, int64_t>> SoftmaxRegression<T>::grad_ready_order() const {
  const auto& infos = store_.infos();
  return {{infos[size_t(weight_)].offset, infos[size_t(bias_)].offset + infos[size_t(bias_)].numel}};
}

template <class T>
StageMemory SoftmaxRegression<T>::memory_for(const BlockContext& ctx, int, bool) const {
  StageMemory m;
  m.cache = (ctx.batch * cfg_.classes + 2 * ctx.batch) * int64_t(sizeof(T));  // logits, lse, losses
  return m;
}

template <class T>
int64_t SoftmaxRegression<T>::correct(const StageCache& cache) const {
  return static_cast<const SoftmaxActivations<T>&>(cache).correct;
}

template class SoftmaxRegression<float>;
template class SoftmaxRegression<double>;

}  // namespace strata
