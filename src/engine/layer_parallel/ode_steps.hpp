#pragma once
// An OdeNetwork's steps (model/ode_network.hpp) as MGRIT time steps (time_stepper.hpp),
// for a batch.
//
// Forward: state u (batch x state), step n of size dt: u + dt F(u, theta_n). A step of
// level l from its point i stands for the c^l fine steps from fine point i c^l and takes
// one step of size c^l h with the weights of the last of them, fine layer (i+1) c^l - 1:
// the layer that ends at the point the step produces, which the rank producing it always
// holds, however the blocks fall (mgrit_layout.hpp), so coarse steps need no weights from
// other ranks.
//
// Adjoint: lambda_n = lambda_{n+1} + h J_n(u_n)^T lambda_{n+1}, run backwards: reversed
// point i is forward point N - i, and the solver's ranks are the forward ranks in
// reverse order (MgritLayout::reversed). A level-l step from reversed point i uses fine
// layer n = N - (i+1) c^l at the forward solution u_n, with size c^l h: again the layer
// that starts at the (forward) point the step produces, so the producing rank holds both
// the layer and u_n (as a point of its block or its ghost).
#include "engine/layer_parallel/mgrit.hpp"
#include "model/ode_network.hpp"

namespace strata {

template <class T>
class OdeForwardSteps : public TimeStepper<T> {
 public:
  OdeForwardSteps(OdeNetwork<T>& net, int64_t batch, int cfactor) : net_(net), batch_(batch), c_(cfactor) {}
  int64_t state_size() const override { return batch_ * net_.state_size(); }
  void step(int level, int64_t i, V1<const T> in, V1<T> out) override {
    int64_t scale = 1;
    for (int l = 0; l < level; ++l) scale *= c_;
    net_.step_forward((i + 1) * scale - 1, T(scale) * net_.h(), as_state(in), as_state(out));
  }
  V2<T> as_state(V1<T> x) const { return V2<T>(x.data(), batch_, net_.state_size()); }
  V2<const T> as_state(V1<const T> x) const { return V2<const T>(x.data(), batch_, net_.state_size()); }

 private:
  OdeNetwork<T>& net_;
  int64_t batch_;
  int c_;
};

template <class T>
class OdeAdjointSteps : public TimeStepper<T> {
 public:
  // forward: the solved forward problem, whose level-0 points (ghost included) hold u_n
  // for this rank's layers.
  OdeAdjointSteps(OdeNetwork<T>& net, Mgrit<T>& forward, int64_t batch, int cfactor)
      : net_(net), forward_(forward), batch_(batch), c_(cfactor) {}
  int64_t state_size() const override { return batch_ * net_.state_size(); }
  void step(int level, int64_t i, V1<const T> in, V1<T> out) override {
    int64_t scale = 1;
    for (int l = 0; l < level; ++l) scale *= c_;
    const int64_t n = net_.steps() - (i + 1) * scale;
    net_.step_adjoint(n, T(scale) * net_.h(), forward_state(n), as_state(in), as_state(out), false);
  }
  // After the adjoint solve: makes the gradients of this rank's layers, given the adjoint
  // solver's points (reversed order, ghost included); one pass with grads per step.
  void accumulate_gradients(Mgrit<T>& adjoint) {
    const int64_t n_total = net_.steps();
    if (int64_t(discard_.extent(0)) != batch_) discard_ = Tensor2<T>("ode.lambda_discard", batch_, net_.state_size());
    for (int64_t n = forward_.first_point(); n < forward_.first_point() + forward_.points(); ++n) {
      const int64_t j = n_total - n - 1 - adjoint.first_point();  // lambda_{n+1}
      net_.step_adjoint(n, net_.h(), forward_state(n), as_state(V1<const T>(adjoint.point(j))), discard_, true);
    }
  }
  int64_t bytes() const { return view_bytes(discard_); }

 private:
  V2<const T> forward_state(int64_t n) { return as_state(V1<const T>(forward_.point(n - forward_.first_point()))); }
  V2<T> as_state(V1<T> x) const { return V2<T>(x.data(), batch_, net_.state_size()); }
  V2<const T> as_state(V1<const T> x) const { return V2<const T>(x.data(), batch_, net_.state_size()); }
  OdeNetwork<T>& net_;
  Mgrit<T>& forward_;
  int64_t batch_;
  int c_;
  Tensor2<T> discard_;  // the gradient pass's lambda_n, which the solve has already
};

}  // namespace strata
