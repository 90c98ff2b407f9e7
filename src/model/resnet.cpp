#include "model/resnet.hpp"

#include <stdexcept>

#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual_tanh.hpp"
#include "model/tensor_shard.hpp"

namespace strata {

template <class T>
void ResNetScratch<T>::ensure(int64_t rows, int64_t width) {
  if (int64_t(z.extent(0)) == rows && int64_t(z.extent(1)) == width) return;
  z = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "resnet.z"), rows, width);
  dz = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "resnet.dz"), rows, width);
}

template <class T>
ResNet<T>::ResNet(const ResNetConfig& cfg, uint64_t seed, StagePlacement placement) : cfg_(cfg), placement_(placement) {
  if (placement_.stages == 1 && placement_.layer_end == 0) placement_.layer_end = int(cfg.steps);
  if (cfg.steps < 1 || cfg.width < 1 || cfg.inputs < 1 || cfg.classes < 2)
    throw std::logic_error("ResNet: steps, width, inputs must be >= 1 and classes >= 2");
  const int64_t w = cfg.width;
  const auto held_if = [](bool held, std::vector<int64_t> shape) { return held ? Shard{} : not_held(shape); };
  open_w_ = store_.add("open.weight", {cfg.inputs, w}, Init::Normal, cfg.init_std, true,
                       held_if(placement_.first(), {cfg.inputs, w}));
  open_b_ = store_.add("open.bias", {w}, Init::Zeros, 0, false, held_if(placement_.first(), {w}));
  for (int64_t n = 0; n < cfg.steps; ++n) {
    const bool held = placement_.holds_layer(int(n));
    step_w_.push_back(store_.add("steps." + std::to_string(n) + ".weight", {w, w}, Init::Normal, cfg.step_init_std,
                                 true, held_if(held, {w, w})));
    step_b_.push_back(store_.add("steps." + std::to_string(n) + ".bias", {w}, Init::Zeros, 0, false, held_if(held, {w})));
  }
  close_w_ = store_.add("close.weight", {w, cfg.classes}, Init::Normal, cfg.init_std, true,
                        held_if(placement_.last(), {w, cfg.classes}));
  close_b_ = store_.add("close.bias", {cfg.classes}, Init::Zeros, 0, false, held_if(placement_.last(), {cfg.classes}));
  store_.allocate(seed);
}

template <class T>
void ResNet<T>::open_forward(V2<const T> x, V2<T> u0) const {
  kernels::gemm<T>("N", "N", T(1), x, store_.param2(open_w_), T(0), u0);
  kernels::bias_tanh<T>(u0, store_.param(open_b_));
}

template <class T>
void ResNet<T>::open_backward(V2<const T> x, V2<const T> du0, ResNetScratch<T>& s) {
  s.ensure(x.extent(0), cfg_.width);
  // recompute z = x W_in, then dz = du0 * tanh'(z + b)
  kernels::gemm<T>("N", "N", T(1), x, store_.param2(open_w_), T(0), s.z);
  kernels::tanh_gate_backward<T>(s.dz, du0, s.z, store_.param(open_b_));
  kernels::matmul_backward<T>(V2<T>(), store_.grad2(open_w_), store_.grad(open_b_), s.dz, x, store_.param2(open_w_));
}

template <class T>
void ResNet<T>::step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out, ResNetScratch<T>& s) const {
  s.ensure(u.extent(0), cfg_.width);
  kernels::gemm<T>("N", "N", T(1), u, store_.param2(step_w_[n]), T(0), s.z);
  kernels::residual_tanh_forward<T>(u_out, u, s.z, store_.param(step_b_[n]), dt);
}

template <class T>
void ResNet<T>::step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in,
                             ResNetScratch<T>& s, bool grads) {
  s.ensure(u.extent(0), cfg_.width);
  const auto w = store_.param2(step_w_[n]);
  kernels::gemm<T>("N", "N", T(1), u, w, T(0), s.z);
  kernels::tanh_gate_backward<T>(s.dz, lambda_out, s.z, store_.param(step_b_[n]));
  Kokkos::deep_copy(lambda_in, lambda_out);
  kernels::gemm<T>("N", "T", dt, s.dz, w, T(1), lambda_in);
  if (!grads) return;
  // dW += dt u^T dz, db += dt 1^T dz: scale dz once, then the linear layer's backward
  const auto dz = s.dz;
  Kokkos::parallel_for(
      "resnet_scale_dz", Range(0, int64_t(dz.size())), KOKKOS_LAMBDA(const int64_t k) { dz.data()[k] *= dt; });
  kernels::matmul_backward<T>(V2<T>(), store_.grad2(step_w_[n]), store_.grad(step_b_[n]), s.dz, u, w);
}

template <class T>
double ResNet<T>::close_forward(V2<const T> u_n, V1<const int32_t> labels, V2<T> logits, V1<T> lse,
                                V1<T> losses) const {
  kernels::matmul_forward<T>(logits, u_n, store_.param2(close_w_), store_.param(close_b_));
  return kernels::cross_entropy_forward<T>(losses, lse, logits, labels);
}

template <class T>
void ResNet<T>::close_backward(V2<const T> u_n, V1<const int32_t> labels, T scale, V2<T> logits, V1<const T> lse,
                               V2<T> du_n) {
  kernels::cross_entropy_backward<T>(logits, logits, lse, labels, scale, 0);
  kernels::matmul_backward<T>(du_n, store_.grad2(close_w_), store_.grad(close_b_), logits, u_n,
                              store_.param2(close_w_));
}

template <class T>
double ResNet<T>::forward(V2<const T> x, V1<const int32_t> labels, std::vector<Tensor2<T>>& u, Tensor2<T>& logits,
                          Tensor1<T>& lse) {
  if (placement_.stages != 1) throw std::logic_error("ResNet::forward is the serial reference");
  const int64_t b = x.extent(0), w = cfg_.width;
  u.resize(size_t(cfg_.steps + 1));
  for (auto& s : u)
    if (int64_t(s.extent(0)) != b) s = Tensor2<T>("resnet.u", b, w);
  ResNetScratch<T> s;
  open_forward(x, u[0]);
  for (int64_t n = 0; n < cfg_.steps; ++n) step_forward(n, h(), u[n], u[n + 1], s);
  logits = Tensor2<T>("resnet.logits", b, cfg_.classes);
  lse = Tensor1<T>("resnet.lse", b);
  Tensor1<T> losses("resnet.losses", b);
  return close_forward(u[cfg_.steps], labels, logits, lse, losses);
}

template <class T>
void ResNet<T>::backward(V2<const T> x, V1<const int32_t> labels, T scale, std::vector<Tensor2<T>>& u,
                         Tensor2<T>& logits, const Tensor1<T>& lse) {
  const int64_t b = x.extent(0), w = cfg_.width;
  Tensor2<T> lambda("resnet.lambda", b, w), next("resnet.lambda_next", b, w);
  ResNetScratch<T> s;
  close_backward(u[cfg_.steps], labels, scale, logits, lse, lambda);
  for (int64_t n = cfg_.steps - 1; n >= 0; --n) {
    step_adjoint(n, h(), u[n], lambda, next, s, true);
    std::swap(lambda, next);
  }
  open_backward(x, lambda, s);
}

template <class T>
int64_t ResNet<T>::flops_per_sample() const {
  const int64_t w = cfg_.width;
  // forward 2 flops per multiply-add; backward twice the forward (input and weight gradients)
  return 3 * 2 * (cfg_.inputs * w + cfg_.steps * w * w + w * cfg_.classes);
}

template struct ResNetScratch<float>;
template struct ResNetScratch<double>;
template class ResNet<float>;
template class ResNet<double>;

}  // namespace strata
