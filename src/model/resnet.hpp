#pragma once
// A residual network for images as an ODE discretisation (Haber & Ruthotto; Günther et
// al., arXiv 1812.04352): an opening layer u_0 = tanh(x W_in + b_in) (pixels -> width),
// N residual steps
//   u_{n+1} = u_n + h tanh(u_n W_n + b_n),   h = t_final / N,
// and a closing layer to class logits with softmax cross-entropy. The convolutional
// variant (channels > 0) keeps each image as a side x side x channels state (NHWC) and
// makes the opening layer and every step a 3x3 convolution (zero padding), computed as
// im2col and a gemm (kernels/im2col.hpp); the closing layer reads the whole state. The steps are the "time
// steps" a layer-parallel solver (engine/layer_parallel/) distributes; this class offers them
// one at a time, forward, adjoint (transposed Jacobian) and parameter gradient, with any
// step size, so a coarse multigrid level can take one step of c h with step n's weights
// (as an OdeNetwork: resnet_steps.hpp).
// Under layer parallelism a rank holds a contiguous range of steps (StagePlacement), the
// first also the opening layer and the last the closing one; every rank declares every
// parameter (empty where another rank holds it), so checkpoints stay global.
//
// It is also a StageModel (stage_model.hpp), so the data-parallel and pipeline engines
// train it with exact backpropagation: a stage is a block of steps, the first opening,
// the last closing with the loss; what passes between stages is the state u.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/deck_choices.hpp"
#include "model/ode_network.hpp"
#include "parallel/stage_placement.hpp"
#include "state/param_store.hpp"

namespace strata {

// Work space of a step, reused by every step of a batch: the pre-activation and its
// gradient, and (convolutional steps) the im2col matrix and its gradient.
template <class T>
struct StepScratch {
  Tensor2<T> z, dz;        // (rows, width)
  Tensor2<T> cols, dcols;  // (rows, 9 x input channels)
  void ensure(int64_t rows, int64_t width) {
    ensure_extents(z, "step.z", rows, width);
    ensure_extents(dz, "step.dz", rows, width);
  }
  void ensure_cols(int64_t rows, int64_t n) {
    ensure_extents(cols, "step.cols", rows, n);
    ensure_extents(dcols, "step.dcols", rows, n);
  }
  int64_t bytes() const { return view_bytes(z, dz, cols, dcols); }
};

struct ResNetConfig {
  int64_t inputs = 784;  // pixels per image
  int64_t width = 64;    // state width (dense)
  int64_t channels = 0;  // > 0: convolutional, with this many channels (images side x side, side^2 = inputs)
  int64_t steps = 64;    // N residual steps
  int64_t classes = 10;
  double t_final = 1.0;                   // T = N h
  double init_std = 0.1;                  // opening and closing weights
  double step_init_std = 0.01;            // residual weights: small, so the steps start smooth across layers
  Precision precision = Precision::FP32;  // of the products (model.precision)
  // parallel.recompute = "full": a stage keeps every k-th state (k near sqrt(its steps))
  // and runs each segment's steps again in the backward (Chen et al.'s sqrt(N) checkpoints)
  bool recompute_states = false;
};

// The stage of `steps` steps keeps the states 0, k, 2k, ... and its last, and remakes the
// k - 1 between two of them (k = 1, all steps + 1 kept, without recomputation): k, and
// how many are kept.
int64_t state_checkpoint_interval(int64_t steps, bool recompute_states);
int64_t kept_states(int64_t steps, bool recompute_states);

// One micro-batch's states on a stage, kept from its forward for its backward.
template <class T>
struct ResNetActivations : StageCache {
  // the stage's states: u[0] its input (or the opened image), then one per step; with
  // recompute_states every k-th and the last only, and one segment's states in `segment`
  std::vector<Tensor2<T>> u, segment;
  Tensor2<T> lambda, next;     // adjoint states (dL/du), lambda ending as the input's gradient
  std::vector<Tensor2<T>> dz;  // backward_input run apart: each step's dt dz, for backward_weight
  Tensor2<T> logits;           // last stage
  Tensor1<T> lse, losses;
  int64_t correct = 0;       // last stage: samples the forward classified right
  V2<const T> features;      // first stage: the images the states were opened from
  V1<const int32_t> labels;  // last stage
  StepScratch<T> scratch;
  int64_t bytes() const override;
};

template <class T>
class ResNet : public StageModel<T> {
 public:
  using StageModel<T>::backward;
  using typename StageModel<T>::GradReadyFn;

  // placement.layer_begin/end: the steps this rank holds (default: all of them).
  ResNet(const ResNetConfig& cfg, uint64_t seed, StagePlacement placement = {});
  ResNet(const ResNet&) = delete;  // its steps' view keeps its address
  ResNet& operator=(const ResNet&) = delete;
  const ResNetConfig& config() const { return cfg_; }
  const StagePlacement& placement() const override { return placement_; }
  ParamStore<T>& params() override { return store_; }
  const ParamStore<T>& params() const override { return store_; }
  T h() const { return T(cfg_.t_final / double(cfg_.steps)); }
  int64_t steps() const { return cfg_.steps; }
  int64_t classes() const { return cfg_.classes; }
  bool convolutional() const { return cfg_.channels > 0; }
  // values per sample of a state: width, or side x side x channels
  int64_t state_size() const { return convolutional() ? side_ * side_ * cfg_.channels : cfg_.width; }

  // x (B, inputs) -> u0 (B, width). First rank only.
  void open_forward(V2<const T> x, V2<T> u0) const;
  // Accumulates the opening layer's gradients from du0 = dL/du0.
  void open_backward(V2<const T> x, V2<const T> du0, StepScratch<T>& s);

  // u_out = u + dt tanh(u W_n + b_n) (u_out may not alias u).
  void step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out, StepScratch<T>& s) const;
  // lambda_in = lambda_out + dt (J_n(u)^T lambda_out): the adjoint of step_forward at u,
  // i.e. dL/du_n from dL/du_{n+1}. With grads, also accumulates step n's weight and bias
  // gradients dt u^T dz and dt 1^T dz (dz = lambda_out * tanh'). lambda_in may not alias.
  void step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, StepScratch<T>& s,
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

  // StageModel: samples are images (batch.features on the first stage, batch.targets
  // the labels on the last); one loss term each.
  const TensorParallel& tensor_parallel() const override { return serial_; }
  int64_t targets_per_sample() const override { return 1; }
  std::unique_ptr<StageCache> make_cache(int = 0) const override { return std::make_unique<ResNetActivations<T>>(); }
  double forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T> input, StageCache& cache) override;
  V2<const T> output(const StageCache& cache) const override;
  std::pair<int64_t, int64_t> boundary_shape(const BlockContext& ctx) const override {
    return {ctx.batch, state_size()};
  }
  // The halves: the input half runs the closing layer's input product and every step's
  // adjoint, keeping each step's dt dz (one state's size per step: StageMemory::weight_pass);
  // the weight half forms every weight and bias gradient from them (and the opening
  // layer's). Refused with recompute_states (the remade states are gone by then).
  void backward_input(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache) override;
  void backward_weight(const BlockContext& ctx, StageCache& cache, const GradReadyFn& on_ready) override;
  V2<const T> input_grad(const StageCache& cache) const override;
  std::vector<std::pair<int64_t, int64_t>> grad_ready_order() const override;
  void micro_batch_traffic(const BlockContext&, Traffic&, int = 0) const override {}  // no tensor split
  // the cache, and on top of it each step's dt dz between the halves (weight_pass)
  StageMemory memory_for(const BlockContext& ctx, int = 0, bool = false) const override;
  bool counts_correct() const override { return true; }
  int64_t correct(const StageCache& cache) const override;
  // Its steps for layer-parallel training (resnet_steps.hpp).

 protected:
  // step by step, each step's adjoint with its gradients
  void run_backward(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache,
                    const GradReadyFn& on_ready) override;

 private:
  // u (B, state_size) as the matrix a layer works on: (B, width), or (B side^2, channels)
  template <class V>
  V rows_of(V u) const;
  // what a step (or the opening layer) multiplies by its weight: u itself, or im2col(u)
  V2<const T> step_input(V2<const T> u, int64_t channels, StepScratch<T>& s) const;
  // the flat-gradient range [begin, end) of parameters first .. last
  std::pair<int64_t, int64_t> range_of(int first, int last) const;
  ResNetConfig cfg_;
  TensorParallel serial_;
  int64_t side_ = 0;
  StagePlacement placement_;
  ParamStore<T> store_;
  kernels::ProductPrecision products_;  // model.precision, with the store's workspace
  int open_w_ = -1, open_b_ = -1, close_w_ = -1, close_b_ = -1;
  std::vector<int> step_w_, step_b_;
};

}  // namespace strata
