#include "engine/layer_parallel/layer_parallel.hpp"

#include <limits>
#include <stdexcept>

#include "core/deck_choices.hpp"
#include "core/log.hpp"

#include "optim/zero_sharding.hpp"

namespace strata {
namespace {
// The solver's blocks: layer rank r holds its placement's steps, which must be the even
// split every rank assumes.
std::vector<int64_t> layer_bounds(const StagePlacement& mine, int64_t steps, const Comm& layers) {
  auto bounds = MgritLayout::balanced(steps, layers.size());
  if (mine.layer_begin != bounds[size_t(layers.rank())] || mine.layer_end != bounds[size_t(layers.rank()) + 1])
    throw std::logic_error("layer parallel: the network's steps are not the balanced block of its layer rank");
  return bounds;
}
}  // namespace

template <class T>
LayerParallel<T>::LayerParallel(OdeNetwork<T>& net, const Grid& grid, int64_t local_batch, LayerParallelOptions options)
    : StepEngine<T>(net), net_(net), layers_(grid.pipeline()), data_(grid.replicas()), opt_(options),
      batch_(local_batch), forward_steps_(net, local_batch, options.forward.cfactor),
      forward_(forward_steps_, layers_, net.steps(), options.forward,
               layer_bounds(net.placement(), net.steps(), layers_)) {
  adjoint_steps_ = std::make_unique<OdeAdjointSteps<T>>(net, forward_, local_batch, options.backward.cfactor);
  const MgritLayout backward(net.steps(), options.backward.cfactor, options.backward.levels,
                             forward_.layout().bounds());
  adjoint_ = std::make_unique<Mgrit<T>>(*adjoint_steps_, grid.pipeline_reversed(), net.steps(), options.backward,
                                        backward.reversed().bounds());
  logits_ = Tensor2<T>("layerpar.logits", local_batch, net.classes());
  lse_ = Tensor1<T>("layerpar.lse", local_batch);
  losses_ = Tensor1<T>("layerpar.losses", local_batch);
}

template <class T>
LayerParallel<T>::~LayerParallel() = default;

template <class T>
MgritStats LayerParallel<T>::solve_forward(V2<const T> x) {
  if (!opt_.warm_start || !forward_warm_) forward_.zero_guess();
  forward_warm_ = true;
  if (layers_.rank() == 0) net_.open_forward(x, forward_steps_.as_state(forward_.point(0)));
  return forward_.solve();
}

template <class T>
std::pair<double, int64_t> LayerParallel<T>::loss_and_accuracy(V1<const int32_t> labels) {
  double loss = 0, correct = 0;
  if (layers_.rank() == layers_.size() - 1) {
    const auto u_n = forward_steps_.as_state(V1<const T>(forward_.point(forward_.points())));
    loss = net_.close_forward(u_n, labels, logits_, lse_, losses_);
    correct = double(count_correct<T>(logits_, labels));
  }
  loss = data_.allreduce_sum(layers_.allreduce_sum(loss));
  correct = data_.allreduce_sum(layers_.allreduce_sum(correct));
  return {loss, int64_t(correct + 0.5)};
}

template <class T>
LayerParallelResult LayerParallel<T>::forward_backward(V2<const T> x, V1<const int32_t> labels, int64_t global_batch) {
  LayerParallelResult r;
  net_.params().zero_grads();
  r.forward = solve_forward(x);
  const auto [loss, correct] = loss_and_accuracy(labels);
  r.loss = loss / double(global_batch);
  r.correct = correct;
  // the adjoint starts at the last layer: dL/du_N, reversed point 0 of the adjoint solve
  if (!opt_.warm_start || !adjoint_warm_) adjoint_->zero_guess();
  adjoint_warm_ = true;
  if (layers_.rank() == layers_.size() - 1) {
    const auto u_n = forward_steps_.as_state(V1<const T>(forward_.point(forward_.points())));
    net_.close_backward(u_n, labels, T(1.0 / double(global_batch)), logits_, lse_,
                        forward_steps_.as_state(adjoint_->point(0)));
  }
  r.backward = adjoint_->solve();
  adjoint_steps_->accumulate_gradients(*adjoint_);
  if (layers_.rank() == 0)  // dL/du_0: the adjoint's last point, on the first layer rank
    net_.open_backward(x, forward_steps_.as_state(V1<const T>(adjoint_->point(adjoint_->points()))), scratch_);
  sum_gradients(data_, data_, net_.params());  // all of them, or with ZeRO-1 this rank's block
  return r;
}

template <class T>
LayerParallelResult LayerParallel<T>::evaluate(V2<const T> x, V1<const int32_t> labels, int64_t global_batch) {
  LayerParallelResult r;
  r.forward = solve_forward(x);
  const auto [loss, correct] = loss_and_accuracy(labels);
  r.loss = loss / double(global_batch);
  r.correct = correct;
  return r;
}

template <class T>
BatchResult LayerParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  timers.start("forward_backward");
  last_ = forward_backward(batch.features, batch.targets, global_batch);
  timers.stop("forward_backward");
  return {last_.loss, last_.correct};
}

template <class T>
BatchResult LayerParallel<T>::evaluate(const SampleBatch<T>& batch, int64_t global_batch) {
  const LayerParallelResult r = evaluate(batch.features, batch.targets, global_batch);
  return {r.loss, r.correct};
}

template <class T>
int64_t LayerParallel<T>::activation_bytes() const {
  return forward_.bytes() + adjoint_->bytes() + view_bytes(logits_, lse_, losses_);
}

template <class T>
std::string LayerParallel<T>::layout_detail() const {
  return strfmt(" L=%d c=%d %s %d/%d", opt_.forward.levels, opt_.forward.cfactor,
                to_string(opt_.forward.fcf ? Relaxation::FCF : Relaxation::F).c_str(), opt_.forward.max_iterations,
                opt_.backward.max_iterations);
}

template <class T>
std::vector<std::string> LayerParallel<T>::metric_columns() const {
  return {"fwd_residual", "fwd_factor"};
}

template <class T>
std::string LayerParallel<T>::progress(std::vector<double>& row) const {
  const MgritStats& fwd = last_.forward;
  const double res = fwd.residuals.empty() ? std::numeric_limits<double>::quiet_NaN() : fwd.residuals.back();
  row.insert(row.end(), {res, fwd.convergence_factor()});
  if (fwd.residuals.empty()) return "";
  return strfmt(" | mgrit fwd res %.1e (factor %.2f) bwd %d it", res, fwd.convergence_factor(),
                last_.backward.iterations);
}

template class LayerParallel<float>;
template class LayerParallel<double>;

}  // namespace strata
