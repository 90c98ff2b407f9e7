#pragma once
// OdeNetwork: a model's layers seen as the steps of an ODE,
//   u_{n+1} = u_n + dt F(u_n, theta_n),
// between an opening part (a batch to the state u_0) and a closing part (the last state
// to the loss): what layer-parallel MGRIT (engine/layer_parallel/) solves like time
// steps. It offers the steps one at a time, of any size dt (a coarse level takes one step
// of c h with one fine layer's weights), their adjoints (transposed Jacobians) and their
// weight gradients. A state is one row of state_size() values per sample of the batch.
//
// The residual network (resnet_steps.hpp: opening and closing layers around its steps)
// and the GPT (gpt_layer_steps.hpp: the embedding and the serial buffer blocks before the
// steps, the buffer blocks after them and the head) are ones. Each keeps the work space
// of its steps, and what its closing part's backward needs from its forward, itself; a
// rank runs one of these passes at a time.
#include <cstdint>
#include <utility>

#include "model/stage_model.hpp"

namespace strata {

// What a closing part's forward sums over the batch: its loss terms and (classifiers)
// the samples predicted right.
struct LossSums {
  double loss = 0;
  int64_t correct = 0;
};

template <class T>
class OdeNetwork {
 public:
  virtual ~OdeNetwork() = default;
  virtual int64_t steps() const = 0;       // N
  virtual T h() const = 0;                 // the fine step
  virtual int64_t state_size() const = 0;  // values per sample of a state
  // The steps this rank holds, [begin, end) (the blocks the solver spreads over the ranks).
  virtual std::pair<int64_t, int64_t> held_steps() const = 0;

  // The first layer rank: batch -> u0 (samples, state_size), keeping what open_backward needs.
  virtual void open_forward(const SampleBatch<T>& batch, V2<T> u0) = 0;
  // Accumulates the opening part's gradients from du0 = dL/du0 (after open_forward of batch).
  virtual void open_backward(const SampleBatch<T>& batch, V2<const T> du0) = 0;
  // u_out = Phi_n(u) with step dt (u_out may not alias u).
  virtual void step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out) = 0;
  // lambda_in = lambda_out + dt J_n(u)^T lambda_out, the adjoint of step_forward at u.
  // With grads, also makes step n's weight gradients: added to what the last zero_grads
  // left. A pass without grads may write them too (the GPT's layer norms take theirs in
  // every backward), so the engine runs one pass with grads per step and batch, last.
  // lambda_in may not alias.
  virtual void step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, bool grads) = 0;
  // The last layer rank: the loss terms (summed) from u_N, keeping what close_backward needs.
  virtual LossSums close_forward(V2<const T> u_n, const SampleBatch<T>& batch) = 0;
  // After close_forward: du_n = dL/du_N for L = dloss_scale x the sum of the loss terms,
  // and the closing part's gradients.
  virtual void close_backward(V2<const T> u_n, const SampleBatch<T>& batch, T dloss_scale, V2<T> du_n) = 0;
  // Bytes the network keeps for these passes (its steps' work space, the open and close parts' caches).
  virtual int64_t bytes() const = 0;
};

}  // namespace strata
