#pragma once
// OdeNetwork: a network whose layers are the steps of an ODE,
//   u_{n+1} = u_n + dt F(u_n, theta_n),
// between an opening layer (input to the state u_0) and a closing layer (the last state
// to logits and the loss): what layer-parallel MGRIT (engine/layer_parallel/) solves like time
// steps. Beyond the stage interface it offers the steps one at a time, of any size dt
// (a coarse level takes one step of c h with one fine layer's weights), their adjoints
// (transposed Jacobians) and their weight gradients. The residual network implements it.
#include <cstdint>

#include "model/stage_model.hpp"

namespace strata {

// Work space of a step, reused by every step of a batch: the pre-activation and its
// gradient, and (convolutional steps) the im2col matrix and its gradient.
template <class T>
struct StepScratch {
  Tensor2<T> z, dz;        // (rows, width)
  Tensor2<T> cols, dcols;  // (rows, 9 x input channels)
  void ensure(int64_t rows, int64_t width) {
    if (int64_t(z.extent(0)) == rows && int64_t(z.extent(1)) == width) return;
    z = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("step.z")), rows, width);
    dz = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("step.dz")), rows, width);
  }
  void ensure_cols(int64_t rows, int64_t n) {
    if (int64_t(cols.extent(0)) == rows && int64_t(cols.extent(1)) == n) return;
    cols = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("step.cols")), rows, n);
    dcols = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("step.dcols")), rows, n);
  }
  int64_t bytes() const { return view_bytes(z, dz, cols, dcols); }
};

template <class T>
class OdeNetwork : public StageModel<T> {
 public:
  OdeNetwork<T>* ode_network() override { return this; }
  virtual int64_t steps() const = 0;       // N
  virtual T h() const = 0;                 // the fine step, t_final / N
  virtual int64_t state_size() const = 0;  // values per sample of a state
  virtual int64_t classes() const = 0;

  // x (B, inputs) -> u0 (B, state). The first layer block's rank only.
  virtual void open_forward(V2<const T> x, V2<T> u0) const = 0;
  // Accumulates the opening layer's gradients from du0 = dL/du0.
  virtual void open_backward(V2<const T> x, V2<const T> du0, StepScratch<T>& s) = 0;
  // u_out = u + dt F(u, theta_n) (u_out may not alias u).
  virtual void step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out, StepScratch<T>& s) const = 0;
  // lambda_in = lambda_out + dt J_n(u)^T lambda_out, the adjoint of step_forward at u; with
  // grads, also accumulates step n's weight gradients. lambda_in may not alias.
  virtual void step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, StepScratch<T>& s,
                            bool grads) = 0;
  // The last block's rank: logits (B, classes) from u_N, lse and losses (B); returns the
  // sum of the losses.
  virtual double close_forward(V2<const T> u_n, V1<const int32_t> labels, V2<T> logits, V1<T> lse,
                               V1<T> losses) const = 0;
  // From close_forward's logits and lse: du_n = dL/du_N for L = scale * sum of losses, and
  // the closing layer's gradients. Overwrites logits.
  virtual void close_backward(V2<const T> u_n, V1<const int32_t> labels, T scale, V2<T> logits, V1<const T> lse,
                              V2<T> du_n) = 0;
};

}  // namespace strata
