#pragma once
// A residual network for images as an ODE discretisation (Haber & Ruthotto; Günther et
// al., arXiv 1812.04352): an opening layer u_0 = tanh(x W_in + b_in) (pixels -> width),
// N residual steps
//   u_{n+1} = u_n + h tanh(u_n W_n + b_n),   h = t_final / N,
// and a closing layer to class logits with softmax cross-entropy. The convolutional
// variant (channels > 0) keeps each image as a side x side x channels state (NHWC) and
// makes the opening layer and every step a 3x3 convolution (zero padding), computed as
// im2col and a gemm (kernels/im2col.hpp); the closing layer reads the whole state. The steps are the "time
// steps" a layer-parallel solver (engine/layerpar/) distributes; this class offers them
// one at a time, forward, adjoint (transposed Jacobian) and parameter gradient, with any
// step size, so a coarse multigrid level can take one step of c h with step n's weights.
// Under layer parallelism a rank holds a contiguous range of steps (StagePlacement), the
// first also the opening layer and the last the closing one; every rank declares every
// parameter (empty where another rank holds it), so checkpoints stay global.
#include <cstdint>

#include "model/param_store.hpp"
#include "model/stage_placement.hpp"

namespace strata {

struct ResNetConfig {
  int64_t inputs = 784;     // pixels per image
  int64_t width = 64;       // state width (dense)
  int64_t channels = 0;     // > 0: convolutional, with this many channels (images side x side, side^2 = inputs)
  int64_t steps = 64;       // N residual steps
  int64_t classes = 10;
  double t_final = 1.0;     // T = N h
  double init_std = 0.1;    // opening and closing weights
  double step_init_std = 0.01;  // residual weights: small, so the steps start smooth across layers
};

template <class T>
struct ResNetScratch {  // per batch size: reused by every step
  Tensor2<T> z, dz;       // (rows, width or channels)
  Tensor2<T> cols, dcols; // convolutional: im2col rows (rows, 9 x input channels)
  void ensure(int64_t rows, int64_t width);
  void ensure_cols(int64_t rows, int64_t cols);
};

template <class T>
class ResNet {
 public:
  // placement.layer_begin/end: the steps this rank holds (default: all of them).
  ResNet(const ResNetConfig& cfg, uint64_t seed, StagePlacement placement = {});
  const ResNetConfig& config() const { return cfg_; }
  const StagePlacement& placement() const { return placement_; }
  ParamStore<T>& params() { return store_; }
  T h() const { return T(cfg_.t_final / double(cfg_.steps)); }
  bool convolutional() const { return cfg_.channels > 0; }
  // values per sample of a state: width, or side x side x channels
  int64_t state_size() const { return convolutional() ? side_ * side_ * cfg_.channels : cfg_.width; }

  // x (B, inputs) -> u0 (B, width). First rank only.
  void open_forward(V2<const T> x, V2<T> u0) const;
  // Accumulates the opening layer's gradients from du0 = dL/du0.
  void open_backward(V2<const T> x, V2<const T> du0, ResNetScratch<T>& s);

  // u_out = u + dt tanh(u W_n + b_n) (u_out may not alias u).
  void step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out, ResNetScratch<T>& s) const;
  // lambda_in = lambda_out + dt (J_n(u)^T lambda_out): the adjoint of step_forward at u,
  // i.e. dL/du_n from dL/du_{n+1}. With grads, also accumulates step n's weight and bias
  // gradients dt u^T dz and dt 1^T dz (dz = lambda_out * tanh'). lambda_in may not alias.
  void step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, ResNetScratch<T>& s,
                    bool grads);

  // Last rank: logits (B, classes) = uN W_out + b_out; writes lse and losses (B); returns
  // the sum of the cross-entropy losses.
  double close_forward(V2<const T> u_n, V1<const int32_t> labels, V2<T> logits, V1<T> lse, V1<T> losses) const;
  // From close_forward's logits and lse: duN = dL/duN for L = scale * sum of losses, and
  // the closing layer's gradients. Overwrites logits with dlogits.
  void close_backward(V2<const T> u_n, V1<const int32_t> labels, T scale, V2<T> logits, V1<const T> lse, V2<T> du_n);

  // Serial reference: every step on this rank, states u (N + 1 of them, (B, width) each).
  // forward returns the summed loss; backward accumulates every gradient.
  double forward(V2<const T> x, V1<const int32_t> labels, std::vector<Tensor2<T>>& u, Tensor2<T>& logits,
                 Tensor1<T>& lse);
  void backward(V2<const T> x, V1<const int32_t> labels, T scale, std::vector<Tensor2<T>>& u, Tensor2<T>& logits,
                const Tensor1<T>& lse);
  int64_t flops_per_sample() const;

 private:
  // u (B, state_size) as the matrix a layer works on: (B, width), or (B side^2, channels)
  template <class V>
  V rows_of(V u) const;
  // what a step (or the opening layer) multiplies by its weight: u itself, or im2col(u)
  V2<const T> step_input(V2<const T> u, int64_t channels, ResNetScratch<T>& s) const;
  ResNetConfig cfg_;
  int64_t side_ = 0;
  StagePlacement placement_;
  ParamStore<T> store_;
  int open_w_ = -1, open_b_ = -1, close_w_ = -1, close_b_ = -1;
  std::vector<int> step_w_, step_b_;
};

}  // namespace strata
