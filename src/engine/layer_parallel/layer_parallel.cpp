#include "engine/layer_parallel/layer_parallel.hpp"

#include <cstdio>
#include <limits>
#include <stdexcept>

#include "core/error.hpp"
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

MgritOptions one_level(MgritOptions o) {
  o.levels = 1;
  return o;
}

double last_or_nan(const std::vector<double>& v) {
  return v.empty() ? std::numeric_limits<double>::quiet_NaN() : v.back();
}
}  // namespace

template <class T>
LayerParallel<T>::LayerParallel(StageModel<T>& model, const Grid& grid, int64_t local_batch,
                                LayerParallelOptions options)
    : StepEngine<T>(model), net_(steps_of(model)), grid_(grid), layers_(grid.pipeline()), data_(grid.replicas()),
      embedding_(grid.embedding()), opt_(options), batch_(local_batch), bounds_(layer_bounds(net_, layers_)) {
  active_ = make_solvers(options.forward, options.backward);
}

template <class T>
LayerParallel<T>::~LayerParallel() = default;

template <class T>
std::unique_ptr<typename LayerParallel<T>::Solvers> LayerParallel<T>::make_solvers(MgritOptions forward,
                                                                                   MgritOptions backward) const {
  auto s = std::make_unique<Solvers>();
  s->forward_options = forward;
  s->backward_options = backward;
  s->forward_steps = std::make_unique<OdeForwardSteps<T>>(net_, batch_, forward.cfactor);
  s->forward = std::make_unique<Mgrit<T>>(*s->forward_steps, layers_, net_.steps(), forward, bounds_);
  s->adjoint_steps = std::make_unique<OdeAdjointSteps<T>>(net_, *s->forward, batch_, backward.cfactor);
  const MgritLayout layout(net_.steps(), backward.cfactor, backward.levels, bounds_);
  s->adjoint = std::make_unique<Mgrit<T>>(*s->adjoint_steps, grid_.pipeline_reversed(), net_.steps(), backward,
                                          layout.reversed().bounds());
  return s;
}

template <class T>
MgritStats LayerParallel<T>::solve_forward(Solvers& s, const SampleBatch<T>& batch) {
  if (!opt_.warm_start || !s.forward_warm) s.forward->zero_guess();
  s.forward_warm = true;
  if (layers_.rank() == 0) net_.open_forward(batch, s.forward_steps->as_state(s.forward->point(0)));
  return s.forward->solve();
}

template <class T>
LossSums LayerParallel<T>::loss_and_accuracy(Solvers& s, const SampleBatch<T>& batch) {
  LossSums sums;
  if (layers_.rank() == layers_.size() - 1) sums = net_.close_forward(last_state(s), batch);
  sums.loss = data_.allreduce_sum(layers_.allreduce_sum(sums.loss));
  const double correct = data_.allreduce_sum(layers_.allreduce_sum(double(sums.correct)));
  sums.correct = int64_t(correct + 0.5);
  return sums;
}

template <class T>
LayerParallelResult LayerParallel<T>::run(Solvers& s, const SampleBatch<T>& batch, int64_t global_batch) {
  LayerParallelResult r;
  auto& store = this->model_.params();
  store.zero_grads();
  const double terms = double(global_batch) * double(this->model_.targets_per_sample());
  r.forward = solve_forward(s, batch);
  const LossSums sums = loss_and_accuracy(s, batch);
  r.loss = sums.loss / terms;
  r.correct = sums.correct;
  // the adjoint starts at the last layer: dL/du_N, reversed point 0 of the adjoint solve
  if (!opt_.warm_start || !s.adjoint_warm) s.adjoint->zero_guess();
  s.adjoint_warm = true;
  if (layers_.rank() == layers_.size() - 1)
    net_.close_backward(last_state(s), batch, T(1.0 / terms), s.forward_steps->as_state(s.adjoint->point(0)));
  r.backward = s.adjoint->solve();
  s.adjoint_steps->accumulate_gradients(*s.adjoint);
  if (layers_.rank() == 0)  // dL/du_0: the adjoint's last point, on the first layer rank
    net_.open_backward(batch, s.forward_steps->as_state(V1<const T>(s.adjoint->point(s.adjoint->points()))));
  if (embedding_ && this->model_.params().table().tied_index() >= 0)
    embedding_->allreduce_sum(store.grad(this->model_.params().table().tied_index()));  // its two copies
  sum_gradients(data_, data_, store);                                  // all of them, or with ZeRO-1 this rank's block
  return r;
}

template <class T>
LayerParallelResult LayerParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, bool check) {
  LayerParallelResult r = run(*active_, batch, global_batch);
  if (check && !active_->exact()) {
    r.check = this->check(batch, global_batch);
    if (opt_.control != GradientControl::None && this->step_ >= opt_.control_after &&
        r.check.error > opt_.max_gradient_error)
      act();
  }
  return r;
}

template <class T>
GradientCheck LayerParallel<T>::check(const SampleBatch<T>& batch, int64_t global_batch) {
  auto& store = this->model_.params();
  if (inexact_grads_.extent(0) != store.grads().extent(0))
    inexact_grads_ =
        Tensor1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "layerpar.inexact_grads"), store.grads().extent(0));
  Kokkos::deep_copy(inexact_grads_, store.grads());
  if (!exact_) exact_ = make_solvers(one_level(opt_.forward), one_level(opt_.backward));
  run(*exact_, batch, global_batch);
  Comm* zero = store.zero().moments_sharded() ? &data_ : nullptr;  // ZeRO-1: each rank's block was summed
  const GradientCheck c = compare_gradients(store, V1<const T>(inexact_grads_), grid_.model(), zero);
  Kokkos::deep_copy(store.grads(), inexact_grads_);  // the step updates with its own gradient
  return c;
}

template <class T>
void LayerParallel<T>::act() {
  acted_at_ = this->step_;
  if (opt_.control == GradientControl::Switch) {
    active_ = exact_ ? std::move(exact_) : make_solvers(one_level(opt_.forward), one_level(opt_.backward));
    return;
  }
  MgritOptions f = active_->forward_options, b = active_->backward_options;  // Tighten
  ++f.max_iterations;
  ++b.max_iterations;
  active_ = make_solvers(f, b);
}

template <class T>
BatchResult LayerParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  timers.start("forward_backward");
  const bool check = opt_.check_every > 0 && (this->step_ + 1) % opt_.check_every == 0;
  last_ = forward_backward(batch, global_batch, check);
  timers.stop("forward_backward");
  return {last_.loss, last_.correct};
}

template <class T>
BatchResult LayerParallel<T>::evaluate(const SampleBatch<T>& batch, int64_t global_batch) {
  solve_forward(*active_, batch);
  const LossSums sums = loss_and_accuracy(*active_, batch);
  return {sums.loss / (double(global_batch) * double(this->model_.targets_per_sample())), sums.correct};
}

template <class T>
int64_t LayerParallel<T>::activation_bytes() const {
  int64_t b = net_.bytes() + view_bytes(inexact_grads_);
  for (const auto* s : {active_.get(), exact_.get()})
    if (s) b += s->forward->bytes() + s->adjoint->bytes() + s->adjoint_steps->bytes();
  return b;
}

template <class T>
std::string LayerParallel<T>::layout_detail() const {
  return strfmt(" L=%d c=%d %s %d/%d", opt_.forward.levels, opt_.forward.cfactor,
                to_string(opt_.forward.fcf ? Relaxation::FCF : Relaxation::F).c_str(), opt_.forward.max_iterations,
                opt_.backward.max_iterations);
}

template <class T>
std::vector<std::string> LayerParallel<T>::metric_columns() const {
  return {"fwd_residual", "fwd_factor", "bwd_residual", "grad_error", "grad_cosine", "mgrit", "fwd_iterations"};
}

template <class T>
std::string LayerParallel<T>::progress(std::vector<double>& row) const {
  const MgritStats& fwd = last_.forward;
  const double res = last_or_nan(fwd.residuals), bwd = last_or_nan(last_.backward.residuals);
  row.insert(row.end(), {res, fwd.convergence_factor(), bwd, last_.check.error, last_.check.cosine,
                         active_->exact() ? 0.0 : 1.0, double(active_->forward_options.max_iterations)});
  std::string s;
  if (!fwd.residuals.empty())
    s += strfmt(" | mgrit fwd res %.1e (factor %.2f) bwd %d it", res, fwd.convergence_factor(),
                last_.backward.iterations);
  if (!std::isnan(last_.check.error)) s += strfmt(" | grad err %.3f cos %.3f", last_.check.error, last_.check.cosine);
  if (acted_at_ >= 0 && acted_at_ == this->step_)
    s += opt_.control == GradientControl::Switch
             ? " | gradient control: exact solves from here on"
             : strfmt(" | gradient control: %d/%d iterations from here on", active_->forward_options.max_iterations,
                      active_->backward_options.max_iterations);
  return s;
}

template <class T>
std::string LayerParallel<T>::checkpoint_state() const {
  if (acted_at_ < 0) return "";
  if (active_->exact()) return strfmt("switched at step %lld", (long long)acted_at_ + 1);
  return strfmt("iterations %d/%d tightened at step %lld", active_->forward_options.max_iterations,
                active_->backward_options.max_iterations, (long long)acted_at_ + 1);
}

template <class T>
void LayerParallel<T>::restore_state(const std::string& state) {
  if (state.empty()) return;
  long long step = 0;
  int f = 0, b = 0;
  if (std::sscanf(state.c_str(), "switched at step %lld", &step) == 1) {
    active_ = make_solvers(one_level(opt_.forward), one_level(opt_.backward));
  } else if (std::sscanf(state.c_str(), "iterations %d/%d tightened at step %lld", &f, &b, &step) == 3) {
    MgritOptions fo = opt_.forward, bo = opt_.backward;
    fo.max_iterations = f;
    bo.max_iterations = b;
    active_ = make_solvers(fo, bo);
  } else {
    throw UserError("the checkpoint's layer-parallel state '" + state + "' is not one strata writes");
  }
  acted_at_ = step - 1;
}

template class LayerParallel<float>;
template class LayerParallel<double>;

}  // namespace strata
