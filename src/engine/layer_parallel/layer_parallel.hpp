#pragma once
// The layer-parallel driver for a model whose layers are ODE steps (OdeNetwork: the residual network, the GPT): the
// forward propagation is an MGRIT solve over the ranks of the layer group (each holds a contiguous block of steps, the
// first also the opening part, the last the closing part and the loss), the backward an adjoint MGRIT solve in reverse
// layer order, after which every rank makes the weight gradients of its own steps from the adjoint states. With a
// fixed number of iterations (torchbraid trains with 2 forward and 1 backward) the gradient is inexact; iterated to
// tolerance it is the serial gradient. Each solve starts from the previous batch's solution (warm start) unless told
// otherwise. The tied embedding's two copies (the GPT's, on the first and the last layer rank) sum their gradients,
// and data replicas theirs, afterwards.
#include <memory>

#include "comm/grid.hpp"
#include "engine/layer_parallel/ode_steps.hpp"
#include "engine/train_engine.hpp"

namespace strata {

struct LayerParallelOptions {
  MgritOptions forward, backward;  // levels, cfactor, iterations, tolerance, relaxation
  bool warm_start = true;
};

struct LayerParallelResult {
  double loss = 0;      // global mean loss (every rank)
  int64_t correct = 0;  // global count of correct predictions (classifiers)
  MgritStats forward, backward;
};

// The engine for parallel.schedule = "mgrit".
template <class T>
class LayerParallel : public StepEngine<T> {
 public:
  // model: this rank's part, whose ode_network() holds its block of steps. The grid's
  // pipeline group is the layer group in layer order (its rank r holds block r; the
  // adjoint runs on its reversed copy), its data group the replicas of this block.
  // local_batch: samples per replica.
  LayerParallel(StageModel<T>& model, const Grid& grid, int64_t local_batch, LayerParallelOptions options);
  ~LayerParallel() override;
  // Zeroes the gradients, then forward and backward of this replica's batch; the gradients
  // end summed over the data replicas, scaled by 1 / (global_batch x targets per sample).
  LayerParallelResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch);
  // The same for a classifier's images x (B, inputs) and labels (B).
  LayerParallelResult forward_backward(V2<const T> x, V1<const int32_t> labels, int64_t global_batch) {
    return forward_backward(images(x, labels), global_batch);
  }
  const LayerParallelOptions& options() const { return opt_; }

  // StepEngine: the same solves; last() keeps the last training step's solver statistics.
  BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) override;
  BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) override;  // the same forward solve
  int64_t activation_bytes() const override;  // the solvers' states on every level, the network's own
  const LayerParallelResult& last() const { return last_; }
  // The next solves start from zero instead of the last solution (the job does this at
  // every checkpoint step, so a restart from a checkpoint repeats the run bit for bit).
  void at_restart_point() override { forward_warm_ = adjoint_warm_ = false; }
  std::string layout_detail() const override;                // " L=2 c=4 FCF 2/2"
  std::vector<std::string> metric_columns() const override;  // the last step's forward residual and factor
  std::string progress(std::vector<double>& row) const override;

 private:
  static SampleBatch<T> images(V2<const T> x, V1<const int32_t> labels) {
    SampleBatch<T> b;
    b.samples = x.extent(0);
    b.features = x;
    b.targets = labels;
    return b;
  }
  MgritStats solve_forward(const SampleBatch<T>& batch);
  // the last layer rank's loss and correct count, summed over the layer group and the
  // replicas (the network keeps what its backward needs)
  LossSums loss_and_accuracy(const SampleBatch<T>& batch);
  V2<const T> last_state() { return forward_steps_.as_state(V1<const T>(forward_.point(forward_.points()))); }

  OdeNetwork<T>& net_;
  Comm& layers_;
  Comm& data_;
  Comm* embedding_;  // the first and the last layer rank, for the tied embedding (else null)
  LayerParallelOptions opt_;
  int64_t batch_;
  OdeForwardSteps<T> forward_steps_;
  Mgrit<T> forward_;
  std::unique_ptr<OdeAdjointSteps<T>> adjoint_steps_;
  std::unique_ptr<Mgrit<T>> adjoint_;
  bool forward_warm_ = false, adjoint_warm_ = false;
  LayerParallelResult last_;
};

}  // namespace strata
