#include "engine/layer_parallel/layer_parallel.hpp"

#include <limits>
#include <stdexcept>

#include "core/deck_choices.hpp"
#include "core/log.hpp"

#include "optim/zero_sharding.hpp"

namespace strata {
namespace {
template <class T>
OdeNetwork<T>& steps_of(StageModel<T>& model) {
  if (!model.ode_network()) throw std::logic_error("layer parallel: the model's layers are not ODE steps");
  return *model.ode_network();
}

// The solver's blocks: layer rank r holds its steps, which must be the even split every
// rank assumes.
template <class T>
std::vector<int64_t> layer_bounds(const OdeNetwork<T>& net, const Comm& layers) {
  auto bounds = MgritLayout::balanced(net.steps(), layers.size());
  const auto [begin, end] = net.held_steps();
  if (begin != bounds[size_t(layers.rank())] || end != bounds[size_t(layers.rank()) + 1])
    throw std::logic_error("layer parallel: the network's steps are not the balanced block of its layer rank");
  return bounds;
}
}  // namespace

template <class T>
LayerParallel<T>::LayerParallel(StageModel<T>& model, const Grid& grid, int64_t local_batch,
                                LayerParallelOptions options)
    : StepEngine<T>(model), net_(steps_of(model)), layers_(grid.pipeline()), data_(grid.replicas()),
      embedding_(grid.embedding()), opt_(options), batch_(local_batch),
      forward_steps_(net_, local_batch, options.forward.cfactor),
      forward_(forward_steps_, layers_, net_.steps(), options.forward, layer_bounds(net_, layers_)) {
  adjoint_steps_ = std::make_unique<OdeAdjointSteps<T>>(net_, forward_, local_batch, options.backward.cfactor);
  const MgritLayout backward(net_.steps(), options.backward.cfactor, options.backward.levels,
                             forward_.layout().bounds());
  adjoint_ = std::make_unique<Mgrit<T>>(*adjoint_steps_, grid.pipeline_reversed(), net_.steps(), options.backward,
                                        backward.reversed().bounds());
}

template <class T>
LayerParallel<T>::~LayerParallel() = default;

template <class T>
MgritStats LayerParallel<T>::solve_forward(const SampleBatch<T>& batch) {
  if (!opt_.warm_start || !forward_warm_) forward_.zero_guess();
  forward_warm_ = true;
  if (layers_.rank() == 0) net_.open_forward(batch, forward_steps_.as_state(forward_.point(0)));
  return forward_.solve();
}

template <class T>
LossSums LayerParallel<T>::loss_and_accuracy(const SampleBatch<T>& batch) {
  LossSums s;
  if (layers_.rank() == layers_.size() - 1) s = net_.close_forward(last_state(), batch);
  s.loss = data_.allreduce_sum(layers_.allreduce_sum(s.loss));
  const double correct = data_.allreduce_sum(layers_.allreduce_sum(double(s.correct)));
  s.correct = int64_t(correct + 0.5);
  return s;
}

template <class T>
LayerParallelResult LayerParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch) {
  LayerParallelResult r;
  auto& store = this->model_.params();
  store.zero_grads();
  const double terms = double(global_batch) * double(this->model_.targets_per_sample());
  r.forward = solve_forward(batch);
  const LossSums sums = loss_and_accuracy(batch);
  r.loss = sums.loss / terms;
  r.correct = sums.correct;
  // the adjoint starts at the last layer: dL/du_N, reversed point 0 of the adjoint solve
  if (!opt_.warm_start || !adjoint_warm_) adjoint_->zero_guess();
  adjoint_warm_ = true;
  if (layers_.rank() == layers_.size() - 1)
    net_.close_backward(last_state(), batch, T(1.0 / terms), forward_steps_.as_state(adjoint_->point(0)));
  r.backward = adjoint_->solve();
  adjoint_steps_->accumulate_gradients(*adjoint_);
  if (layers_.rank() == 0)  // dL/du_0: the adjoint's last point, on the first layer rank
    net_.open_backward(batch, forward_steps_.as_state(V1<const T>(adjoint_->point(adjoint_->points()))));
  if (embedding_ && this->model_.tied_index() >= 0)
    embedding_->allreduce_sum(store.grad(this->model_.tied_index()));  // its two copies
  sum_gradients(data_, data_, store);                                  // all of them, or with ZeRO-1 this rank's block
  return r;
}

template <class T>
BatchResult LayerParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  timers.start("forward_backward");
  last_ = forward_backward(batch, global_batch);
  timers.stop("forward_backward");
  return {last_.loss, last_.correct};
}

template <class T>
BatchResult LayerParallel<T>::evaluate(const SampleBatch<T>& batch, int64_t global_batch) {
  solve_forward(batch);
  const LossSums sums = loss_and_accuracy(batch);
  return {sums.loss / (double(global_batch) * double(this->model_.targets_per_sample())), sums.correct};
}

template <class T>
int64_t LayerParallel<T>::activation_bytes() const {
  return forward_.bytes() + adjoint_->bytes() + adjoint_steps_->bytes() + net_.bytes();
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
