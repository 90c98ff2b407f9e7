#pragma once
// Softmax regression: logits = x W + b over an image's pixels, cross-entropy against its
// label; the smallest classifier (model.kind = "softmax"), on one stage with no tensor
// split. Data parallelism, micro-batches, ZeRO-1 and bf16 products apply to it as to any
// StageModel. It is also the proof that a model kind is added in src/model alone
// (docs/design.md, "Adding things").
#include "model/stage_model.hpp"
#include "parallel/tensor_parallel.hpp"
#include "state/param_store.hpp"

namespace strata {

struct SoftmaxRegressionConfig {
  int64_t inputs = 0;  // pixels per sample
  int64_t classes = 0;
  double init_std = 0.02;
  Precision precision = Precision::FP32;
};

template <class T>
struct SoftmaxActivations : StageCache {
  V2<const T> features;  // the batch's, read again by the backward
  V1<const int32_t> labels;
  Tensor2<T> logits;       // (B, classes); the backward overwrites them with dlogits
  Tensor1<T> lse, losses;  // (B)
  int64_t correct = 0;
  int64_t bytes() const override { return view_bytes(logits, lse, losses); }
};

template <class T>
class SoftmaxRegression : public StageModel<T> {
 public:
  using typename StageModel<T>::GradReadyFn;
  using StageModel<T>::backward;

  SoftmaxRegression(const SoftmaxRegressionConfig& cfg, uint64_t seed);
  const SoftmaxRegressionConfig& config() const { return cfg_; }

  ParamStore<T>& params() override { return store_; }
  const ParamStore<T>& params() const override { return store_; }
  const StagePlacement& placement() const override { return placement_; }
  const TensorParallel& tensor_parallel() const override { return serial_; }
  int64_t targets_per_sample() const override { return 1; }
  std::unique_ptr<StageCache> make_cache(int = 0) const override { return std::make_unique<SoftmaxActivations<T>>(); }
  double forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T> input, StageCache& cache) override;
  V2<const T> output(const StageCache& cache) const override;
  std::pair<int64_t, int64_t> boundary_shape(const BlockContext& ctx) const override {
    return {ctx.batch, cfg_.classes};
  }
  // The input half turns the logits into their gradient (the model's input needs none);
  // the weight half forms W's and b's gradients from it.
  void backward_input(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache) override;
  void backward_weight(const BlockContext& ctx, StageCache& cache, const GradReadyFn& on_ready) override;
  V2<const T> input_grad(const StageCache&) const override { return {}; }
  std::vector<std::pair<int64_t, int64_t>> grad_ready_order() const override;
  void micro_batch_traffic(const BlockContext&, Traffic&, int = 0) const override {}  // no tensor split
  StageMemory memory_for(const BlockContext& ctx, int = 0, bool = false) const override;
  bool counts_correct() const override { return true; }
  int64_t correct(const StageCache& cache) const override;

 private:
  SoftmaxRegressionConfig cfg_;
  StagePlacement placement_;
  TensorParallel serial_;
  ParamStore<T> store_;
  kernels::ProductPrecision products_;  // model.precision, with the store's workspace
  int weight_ = -1, bias_ = -1;
};

}  // namespace strata
