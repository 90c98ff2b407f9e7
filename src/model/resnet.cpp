#include "model/resnet.hpp"

#include <stdexcept>

#include "kernels/cross_entropy.hpp"
#include "kernels/im2col.hpp"
#include "kernels/matmul.hpp"
#include "kernels/products.hpp"
#include "kernels/residual_tanh.hpp"
#include "state/tensor_shard.hpp"

namespace strata {

template <class T>
template <class V>
V ResNet<T>::rows_of(V u) const {
  if (!convolutional()) return u;
  return V(u.data(), u.extent(0) * side_ * side_, cfg_.channels);
}

template <class T>
V2<const T> ResNet<T>::step_input(V2<const T> u, int64_t channels, StepScratch<T>& s) const {
  if (!convolutional()) return u;
  const int64_t b = u.extent(0);
  s.ensure_cols(b * side_ * side_, 9 * channels);
  kernels::im2col_3x3<T>(s.cols, u.data(), b, side_, side_, channels);
  return s.cols;
}

template <class T>
ResNet<T>::ResNet(const ResNetConfig& cfg, uint64_t seed, StagePlacement placement)
    : cfg_(cfg), placement_(placement), products_(store_.product_precision(cfg.precision)) {
  if (placement_.stages == 1 && placement_.layer_end == 0) placement_.layer_end = int(cfg.steps);
  if (placement_.chunk_count() > 1)
    throw std::logic_error("ResNet: one contiguous block of steps per stage (no interleaved chunks)");
  if (cfg.steps < 1 || cfg.width < 1 || cfg.inputs < 1 || cfg.classes < 2)
    throw std::logic_error("ResNet: steps, width, inputs must be >= 1 and classes >= 2");
  if (cfg.channels > 0) {
    while (side_ * side_ < cfg.inputs) ++side_;
    if (side_ * side_ != cfg.inputs) throw std::logic_error("ResNet: convolutional needs square images");
  }
  // dense: weights (width in, width out); convolutional: (9 x channels in, channels out)
  const int64_t w = convolutional() ? cfg.channels : cfg.width;
  const int64_t open_in = convolutional() ? 9 : cfg.inputs, step_in = convolutional() ? 9 * w : w;
  const auto held_if = [](bool held, std::vector<int64_t> shape) { return held ? Shard{} : not_held(shape); };
  open_w_ = store_.add("open.weight", {open_in, w}, Init::Normal, cfg.init_std, true,
                       held_if(placement_.first(), {open_in, w}));
  open_b_ = store_.add("open.bias", {w}, Init::Zeros, 0, false, held_if(placement_.first(), {w}));
  for (int64_t n = 0; n < cfg.steps; ++n) {
    const bool held = placement_.holds_layer(int(n));
    step_w_.push_back(store_.add("steps." + std::to_string(n) + ".weight", {step_in, w}, Init::Normal,
                                 cfg.step_init_std, true, held_if(held, {step_in, w})));
    step_b_.push_back(
        store_.add("steps." + std::to_string(n) + ".bias", {w}, Init::Zeros, 0, false, held_if(held, {w})));
  }
  close_w_ = store_.add("close.weight", {state_size(), cfg.classes}, Init::Normal, cfg.init_std, true,
                        held_if(placement_.last(), {state_size(), cfg.classes}));
  close_b_ = store_.add("close.bias", {cfg.classes}, Init::Zeros, 0, false, held_if(placement_.last(), {cfg.classes}));
  store_.allocate(seed);
}

template <class T>
void ResNet<T>::open_forward(V2<const T> x, V2<T> u0) const {
  StepScratch<T> s;
  const auto in = step_input(x, 1, s);
  kernels::product<T>(products_, "N", "N", in, store_.param2(open_w_), T(0), rows_of(u0));
  kernels::bias_tanh<T>(rows_of(u0), store_.param(open_b_));
}

template <class T>
void ResNet<T>::open_backward(V2<const T> x, V2<const T> du0, StepScratch<T>& s) {
  const auto in = step_input(x, 1, s);
  s.ensure(in.extent(0), convolutional() ? cfg_.channels : cfg_.width);
  // recompute z = in W_in, then dz = du0 * tanh'(z + b)
  kernels::product<T>(products_, "N", "N", in, store_.param2(open_w_), T(0), s.z);
  kernels::tanh_gate_backward<T>(s.dz, rows_of(du0), s.z, store_.param(open_b_));
  kernels::matmul_backward<T>(V2<T>(), store_.grad2(open_w_), store_.grad(open_b_), s.dz, in, store_.param2(open_w_),
                              products_);
}

template <class T>
void ResNet<T>::step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out, StepScratch<T>& s) const {
  const auto in = step_input(u, cfg_.channels, s);
  s.ensure(in.extent(0), convolutional() ? cfg_.channels : cfg_.width);
  kernels::product<T>(products_, "N", "N", in, store_.param2(step_w_[n]), T(0), s.z);
  kernels::residual_tanh_forward<T>(rows_of(u_out), rows_of(u), s.z, store_.param(step_b_[n]), dt);
}

template <class T>
void ResNet<T>::step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, StepScratch<T>& s,
                             bool grads) {
  const auto in = step_input(u, cfg_.channels, s);
  s.ensure(in.extent(0), convolutional() ? cfg_.channels : cfg_.width);
  const auto w = store_.param2(step_w_[n]);
  kernels::product<T>(products_, "N", "N", in, w, T(0), s.z);
  kernels::tanh_gate_backward<T>(s.dz, rows_of(lambda_out), s.z, store_.param(step_b_[n]));
  // dz *= dt once: lambda_in = lambda_out + (dt dz) W^T and dW += in^T (dt dz), db += 1^T (dt dz)
  const auto dz = s.dz;
  Kokkos::parallel_for(
      "resnet_scale_dz", Range(0, int64_t(dz.size())), KOKKOS_LAMBDA(const int64_t k) { dz.data()[k] *= dt; });
  Kokkos::deep_copy(lambda_in, lambda_out);
  if (convolutional()) {  // lambda_in += col2im(dz W^T)
    kernels::product<T>(products_, "N", "T", s.dz, w, T(0), s.dcols);
    kernels::col2im_3x3_add<T>(lambda_in.data(), s.dcols, u.extent(0), side_, side_, cfg_.channels, T(1));
  } else {
    kernels::product<T>(products_, "N", "T", s.dz, w, T(1), lambda_in);
  }
  if (!grads) return;
  kernels::matmul_backward<T>(V2<T>(), store_.grad2(step_w_[n]), store_.grad(step_b_[n]), s.dz, in, w, products_);
}

template <class T>
double ResNet<T>::close_forward(V2<const T> u_n, V1<const int32_t> labels, V2<T> logits, V1<T> lse,
                                V1<T> losses) const {
  kernels::matmul_forward<T>(logits, u_n, store_.param2(close_w_), store_.param(close_b_), products_);
  return kernels::cross_entropy_forward<T>(losses, lse, logits, labels);
}

template <class T>
void ResNet<T>::close_backward(V2<const T> u_n, V1<const int32_t> labels, T scale, V2<T> logits, V1<const T> lse,
                               V2<T> du_n) {
  kernels::cross_entropy_backward<T>(logits, logits, lse, labels, scale, 0);
  kernels::matmul_backward<T>(du_n, store_.grad2(close_w_), store_.grad(close_b_), logits, u_n, store_.param2(close_w_),
                              products_);
}

template <class T>
double ResNet<T>::forward(V2<const T> x, V1<const int32_t> labels, std::vector<Tensor2<T>>& u, Tensor2<T>& logits,
                          Tensor1<T>& lse) {
  if (placement_.stages != 1) throw std::logic_error("ResNet::forward is the serial reference");
  const int64_t b = x.extent(0), w = state_size();
  u.resize(size_t(cfg_.steps + 1));
  for (auto& s : u)
    if (int64_t(s.extent(0)) != b) s = Tensor2<T>("resnet.u", b, w);
  StepScratch<T> s;
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
  const int64_t b = x.extent(0), w = state_size();
  Tensor2<T> lambda("resnet.lambda", b, w), next("resnet.lambda_next", b, w);
  StepScratch<T> s;
  close_backward(u[cfg_.steps], labels, scale, logits, lse, lambda);
  for (int64_t n = cfg_.steps - 1; n >= 0; --n) {
    step_adjoint(n, h(), u[n], lambda, next, s, true);
    std::swap(lambda, next);
  }
  open_backward(x, lambda, s);
}

// ---- as a StageModel --------------------------------------------------------------------

template <class T>
int64_t ResNetActivations<T>::bytes() const {
  int64_t b = view_bytes(lambda, next, logits, lse, losses) + scratch.bytes();
  for (const auto* list : {&u, &segment, &dz})
    for (const auto& s : *list) b += view_bytes(s);
  return b;
}

int64_t state_checkpoint_interval(int64_t steps, bool recompute_states) {
  // the fewest states held, ceil(steps / k) + 1 kept and k - 1 remade: k near sqrt(steps);
  // of equals the smallest k (the fewest steps run again)
  int64_t best = 1;
  const auto held = [&](int64_t k) { return (steps + k - 1) / k + k; };
  if (recompute_states)
    for (int64_t k = 2; k * k <= 4 * steps; ++k)
      if (held(k) < held(best)) best = k;
  return best;
}

int64_t kept_states(int64_t steps, bool recompute_states) {
  const int64_t k = state_checkpoint_interval(steps, recompute_states);
  return (steps + k - 1) / k + 1;  // 0, k, 2k, ... below steps, and the last
}

template <class T>
double ResNet<T>::forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T> input, StageCache& cache) {
  auto& a = static_cast<ResNetActivations<T>&>(cache);
  const int64_t b = ctx.batch, w = state_size(), steps = placement_.layer_end - placement_.layer_begin;
  const int64_t every = state_checkpoint_interval(steps, cfg_.recompute_states);
  a.u.resize(size_t(kept_states(steps, cfg_.recompute_states)));
  for (auto& s : a.u) ensure_extents(s, "resnet.u", b, w);
  // the k - 1 states between two checkpoints, remade in the backward; in the forward they
  // pass through the first two (one when k = 2)
  a.segment.resize(size_t(every - 1));
  for (auto& s : a.segment) ensure_extents(s, "resnet.segment", b, w);
  if (placement_.first()) {
    a.features = batch.features;
    open_forward(batch.features, a.u[0]);
  } else {
    Kokkos::deep_copy(a.u[0], input);
  }
  V2<const T> state = a.u[0];
  for (int64_t k = 0; k < steps; ++k) {
    const bool kept = (k + 1) % every == 0 || k + 1 == steps;
    V2<T> next = kept ? V2<T>(a.u[size_t((k + every) / every)]) : V2<T>(a.segment[size_t(k % 2) % a.segment.size()]);
    step_forward(placement_.layer_begin + k, h(), state, next, a.scratch);
    state = next;
  }
  if (!placement_.last()) return 0.0;
  a.labels = batch.targets;
  ensure_extents(a.logits, "resnet.logits", b, cfg_.classes);
  ensure_extents(a.lse, "resnet.lse", b);
  ensure_extents(a.losses, "resnet.losses", b);
  const double loss = close_forward(a.u.back(), a.labels, a.logits, a.lse, a.losses);
  a.correct = kernels::count_correct<T>(a.logits, a.labels);
  return loss;
}

template <class T>
V2<const T> ResNet<T>::output(const StageCache& cache) const {
  return static_cast<const ResNetActivations<T>&>(cache).u.back();
}

template <class T>
V2<const T> ResNet<T>::input_grad(const StageCache& cache) const {
  return static_cast<const ResNetActivations<T>&>(cache).lambda;
}

template <class T>
int64_t ResNet<T>::correct(const StageCache& cache) const {
  return static_cast<const ResNetActivations<T>&>(cache).correct;
}

template <class T>
void ResNet<T>::run_backward(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache,
                             const GradReadyFn& on_ready) {
  auto& a = static_cast<ResNetActivations<T>&>(cache);
  const auto ready = [&](const std::pair<int64_t, int64_t>& r) {
    if (on_ready) on_ready(r.first, r.second - r.first);
  };
  const int64_t b = ctx.batch, w = state_size();
  ensure_extents(a.lambda, "resnet.lambda", b, w);
  ensure_extents(a.next, "resnet.lambda_next", b, w);
  if (placement_.last()) {
    close_backward(a.u.back(), a.labels, dloss_scale, a.logits, a.lse, a.lambda);
    ready(range_of(close_w_, close_b_));
  } else {
    Kokkos::deep_copy(a.lambda, dout);
  }
  const int64_t steps = placement_.layer_end - placement_.layer_begin;
  const int64_t every = state_checkpoint_interval(steps, cfg_.recompute_states);
  for (int64_t first = (steps - 1) / every * every; first >= 0; first -= every) {  // segments, last first
    const int64_t end = std::min(steps, first + every);
    // the segment's states: its checkpoint, then (recomputation) its steps run again
    const auto state = [&](int64_t k) -> V2<const T> {
      return k == first ? V2<const T>(a.u[size_t(first / every)]) : V2<const T>(a.segment[size_t(k - first - 1)]);
    };
    for (int64_t k = first; k + 1 < end; ++k)
      step_forward(placement_.layer_begin + k, h(), state(k), a.segment[size_t(k - first)], a.scratch);
    for (int64_t k = end; k-- > first;) {
      const int64_t n = placement_.layer_begin + k;
      step_adjoint(n, h(), state(k), a.lambda, a.next, a.scratch, true);
      std::swap(a.lambda, a.next);
      ready(range_of(step_w_[size_t(n)], step_b_[size_t(n)]));
    }
  }
  if (placement_.first()) {
    open_backward(a.features, a.lambda, a.scratch);
    ready(range_of(open_w_, open_b_));
  }
}

template <class T>
void ResNet<T>::backward_input(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache) {
  if (cfg_.recompute_states)
    throw std::logic_error("ResNet: the backward's halves run apart need parallel.recompute = \"none\"");
  auto& a = static_cast<ResNetActivations<T>&>(cache);
  const int64_t b = ctx.batch, w = state_size(), steps = placement_.layer_end - placement_.layer_begin;
  ensure_extents(a.lambda, "resnet.lambda", b, w);
  ensure_extents(a.next, "resnet.lambda_next", b, w);
  if (placement_.last()) {
    kernels::cross_entropy_backward<T>(a.logits, a.logits, a.lse, a.labels, dloss_scale, 0);  // logits := dlogits
    kernels::matmul_backward_input<T>(a.lambda, a.logits, store_.param2(close_w_), products_);
  } else {
    Kokkos::deep_copy(a.lambda, dout);
  }
  a.dz.resize(size_t(steps));
  for (int64_t k = steps; k-- > 0;) {
    step_adjoint(placement_.layer_begin + k, h(), a.u[size_t(k)], a.lambda, a.next, a.scratch, false);
    ensure_extents(a.dz[size_t(k)], "resnet.dz", a.scratch.dz.extent(0), a.scratch.dz.extent(1));
    Kokkos::deep_copy(a.dz[size_t(k)], a.scratch.dz);
    std::swap(a.lambda, a.next);
  }
}

template <class T>
void ResNet<T>::backward_weight(const BlockContext&, StageCache& cache, const GradReadyFn& on_ready) {
  auto& a = static_cast<ResNetActivations<T>&>(cache);
  const auto ready = [&](const std::pair<int64_t, int64_t>& r) {
    if (on_ready) on_ready(r.first, r.second - r.first);
  };
  if (placement_.last()) {
    kernels::matmul_backward_weight<T>(store_.grad2(close_w_), store_.grad(close_b_), a.logits, a.u.back(), products_);
    ready(range_of(close_w_, close_b_));
  }
  for (int64_t k = int64_t(a.dz.size()); k-- > 0;) {
    const int64_t n = placement_.layer_begin + k;
    kernels::matmul_backward_weight<T>(store_.grad2(step_w_[size_t(n)]), store_.grad(step_b_[size_t(n)]),
                                       a.dz[size_t(k)], step_input(a.u[size_t(k)], cfg_.channels, a.scratch),
                                       products_);
    ready(range_of(step_w_[size_t(n)], step_b_[size_t(n)]));
  }
  if (placement_.first()) {
    open_backward(a.features, a.lambda, a.scratch);
    ready(range_of(open_w_, open_b_));
  }
}

template <class T>
std::pair<int64_t, int64_t> ResNet<T>::range_of(int first, int last) const {
  const auto& infos = store_.infos();
  return {infos[size_t(first)].offset, infos[size_t(last)].offset + infos[size_t(last)].numel};
}

template <class T>
std::vector<std::pair<int64_t, int64_t>> ResNet<T>::grad_ready_order() const {
  std::vector<std::pair<int64_t, int64_t>> order;
  if (placement_.last()) order.push_back(range_of(close_w_, close_b_));
  for (int64_t n = placement_.layer_end; n-- > placement_.layer_begin;)
    order.push_back(range_of(step_w_[size_t(n)], step_b_[size_t(n)]));
  if (placement_.first()) order.push_back(range_of(open_w_, open_b_));
  return order;
}

template <class T>
StageMemory ResNet<T>::memory_for(const BlockContext& ctx, int, bool) const {
  const int64_t b = ctx.batch, w = state_size(), e = sizeof(T), steps = placement_.layer_end - placement_.layer_begin;
  const int64_t c = convolutional() ? cfg_.channels : cfg_.width, rows = convolutional() ? b * side_ * side_ : b;
  const int64_t every = state_checkpoint_interval(steps, cfg_.recompute_states);
  int64_t bytes = (kept_states(steps, cfg_.recompute_states) + every - 1 + 2) * b * w * e;  // states, lambda, next
  bytes += 2 * rows * c * e;                                                                // scratch z, dz
  // im2col rows and their gradient, last sized by the opening layer's backward on the first stage
  if (convolutional()) bytes += 2 * rows * 9 * (placement_.first() ? 1 : cfg_.channels) * e;
  if (placement_.last()) bytes += (b * cfg_.classes + 2 * b) * e;  // logits, lse, losses
  StageMemory m;
  m.cache = bytes;
  m.weight_pass = steps * rows * c * e;  // each step's dt dz
  return m;
}

template struct ResNetActivations<float>;
template struct ResNetActivations<double>;
template class ResNet<float>;
template class ResNet<double>;

}  // namespace strata
