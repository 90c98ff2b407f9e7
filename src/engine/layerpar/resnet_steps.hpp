#pragma once
// The residual network's steps as MGRIT time steps (time_stepper.hpp), for a batch.
//
// Forward: state u (batch x width), step n of size dt: u + dt tanh(u W_n + b_n). A step of
// level l from its point i stands for c^l fine steps and takes one step of size c^l h
// with the weights of fine layer i c^l (injection from the left fine layer).
//
// Adjoint: lambda_n = lambda_{n+1} + h J_n(u_n)^T lambda_{n+1}, run backwards: reversed
// point i is forward point N - i, and the solver's ranks are the forward ranks in
// reverse order. A level-l step from reversed point i uses fine layer n = N - (i+1) c^l at
// the forward solution u_n (which the rank holding that layer has), with size c^l h.
#include "engine/layerpar/mgrit.hpp"
#include "model/resnet.hpp"

namespace strata {

template <class T>
class ResNetForwardSteps : public TimeStepper<T> {
 public:
  ResNetForwardSteps(ResNet<T>& net, int64_t batch, int cfactor) : net_(net), batch_(batch), c_(cfactor) {}
  int64_t state_size() const override { return batch_ * net_.state_size(); }
  void step(int level, int64_t i, V1<const T> in, V1<T> out) override {
    int64_t scale = 1;
    for (int l = 0; l < level; ++l) scale *= c_;
    net_.step_forward(i * scale, T(scale) * net_.h(), as_state(in), as_state(out), scratch_);
  }
  V2<T> as_state(V1<T> x) const { return V2<T>(x.data(), batch_, net_.state_size()); }
  V2<const T> as_state(V1<const T> x) const { return V2<const T>(x.data(), batch_, net_.state_size()); }

 private:
  ResNet<T>& net_;
  int64_t batch_;
  int c_;
  ResNetScratch<T> scratch_;
};

template <class T>
class ResNetAdjointSteps : public TimeStepper<T> {
 public:
  // forward: the solved forward problem, whose level-0 points (ghost included) hold u_n
  // for this rank's layers.
  ResNetAdjointSteps(ResNet<T>& net, Mgrit<T>& forward, int64_t batch, int cfactor)
      : net_(net), forward_(forward), batch_(batch), c_(cfactor) {}
  int64_t state_size() const override { return batch_ * net_.state_size(); }
  void step(int level, int64_t i, V1<const T> in, V1<T> out) override {
    int64_t scale = 1;
    for (int l = 0; l < level; ++l) scale *= c_;
    const int64_t n = net_.config().steps - (i + 1) * scale;
    net_.step_adjoint(n, T(scale) * net_.h(), forward_state(n), as_state(in), as_state(out), scratch_, false);
  }
  // After the adjoint solve: accumulates the gradients of this rank's layers, given the
  // adjoint solver's points (reversed order, ghost included).
  void accumulate_gradients(Mgrit<T>& adjoint) {
    const int64_t n_total = net_.config().steps;
    Tensor2<T> discard("resnet.lambda_discard", batch_, net_.state_size());
    for (int64_t n = forward_.first_point(); n < forward_.first_point() + forward_.points(); ++n) {
      const int64_t j = n_total - n - 1 - adjoint.first_point();  // lambda_{n+1}
      net_.step_adjoint(n, net_.h(), forward_state(n), as_state(V1<const T>(adjoint.point(j))), discard, scratch_, true);
    }
  }

 private:
  V2<const T> forward_state(int64_t n) { return as_state(V1<const T>(forward_.point(n - forward_.first_point()))); }
  V2<T> as_state(V1<T> x) const { return V2<T>(x.data(), batch_, net_.state_size()); }
  V2<const T> as_state(V1<const T> x) const { return V2<const T>(x.data(), batch_, net_.state_size()); }
  ResNet<T>& net_;
  Mgrit<T>& forward_;
  int64_t batch_;
  int c_;
  ResNetScratch<T> scratch_;
};

}  // namespace strata
