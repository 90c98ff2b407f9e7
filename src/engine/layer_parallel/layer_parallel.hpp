#pragma once
// The layer-parallel driver for a model whose layers are ODE steps (OdeNetwork: the residual network, the GPT): the
// forward propagation is an MGRIT solve over the ranks of the layer group (each holds a contiguous block of steps, the
// first also the opening part, the last the closing part and the loss), the backward an adjoint MGRIT solve in reverse
// layer order, after which every rank makes the weight gradients of its own steps from the adjoint states. With a
// fixed number of iterations (torchbraid trains with 2 forward and 1 backward) the gradient is inexact; iterated to
// tolerance it is the serial gradient. Each solve starts from the previous batch's solution (warm start) unless told
// otherwise. The tied embedding's two copies (the GPT's, on the first and the last layer rank) sum their gradients,
// and data replicas theirs, afterwards.
//
// The gradient control (Jiang et al., arXiv 2601.09026: the inexact gradients' bias slows training near a minimum):
// every check_every steps the step's gradient is compared with the exact one, made by one-level solves of the same
// batch (the layer ranks' chain: the serial network); the update uses the step's own gradient, so a check changes
// nothing but the step's time. Where the relative error exceeds max_gradient_error after the learning rate's warm-up
// (where the error is large but the steps small: the weights are still far from anything the bias could hold them
// off), "switch" makes every later solve
// the exact one-level chain (serial training on the same ranks, as a one-micro-batch pipeline) and "tighten" adds one
// iteration to each solve (checking on); checkpoint_state() carries either decision through a restart.
#include <memory>

#include "comm/grid.hpp"
#include "core/deck_choices.hpp"
#include "engine/layer_parallel/gradient_check.hpp"
#include "engine/layer_parallel/ode_steps.hpp"
#include "engine/train_engine.hpp"

namespace strata {

struct LayerParallelOptions {
  MgritOptions forward, backward;  // levels, cfactor, iterations, tolerance, relaxation
  bool warm_start = true;
  GradientControl control = GradientControl::None;
  int64_t check_every = 0;  // steps between gradient checks (0: none)
  double max_gradient_error = 0.3;
  int64_t control_after = 0;  // steps before the control may act (the learning rate's warm-up)
};

struct LayerParallelResult {
  double loss = 0;      // global mean loss (every rank)
  int64_t correct = 0;  // global count of correct predictions (classifiers)
  MgritStats forward, backward;
  GradientCheck check;  // a check step's comparison with the exact gradient (else NaN)
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
  // check: also compare them with the exact gradient (and act on the control's rule).
  LayerParallelResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, bool check = false);
  // The same for a classifier's images x (B, inputs) and labels (B).
  LayerParallelResult forward_backward(V2<const T> x, V1<const int32_t> labels, int64_t global_batch) {
    return forward_backward(images(x, labels), global_batch);
  }
  const LayerParallelOptions& options() const { return opt_; }

  // StepEngine: the same solves, checking every check_every steps; last() keeps the last
  // training step's solver statistics.
  BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) override;
  BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) override;  // the same forward solve
  int64_t activation_bytes() const override;  // the solvers' states on every level, the network's own
  const LayerParallelResult& last() const { return last_; }
  // The next solves start from zero instead of the last solution (the job does this at
  // every checkpoint step, so a restart from a checkpoint repeats the run bit for bit).
  void at_restart_point() override { active_->forward_warm = active_->adjoint_warm = false; }
  std::string layout_detail() const override;  // " L=2 c=4 F 2/1"
  // the last step's forward and adjoint residuals and forward factor, its gradient check,
  // and the solves' state: 1 while inexact MGRIT, 0 once exact; the forward iterations
  std::vector<std::string> metric_columns() const override;
  std::string progress(std::vector<double>& row) const override;
  // "switched at step S" or "iterations F/B tightened at step S" ("" before any decision)
  std::string checkpoint_state() const override;
  void restore_state(const std::string& state) override;
  // where the control acted (-1: not yet) and whether the solves are exact now
  int64_t acted_at() const { return acted_at_; }
  bool exact() const { return active_->exact(); }

 private:
  // The forward and adjoint solvers of one set of options, and their warm starts.
  struct Solvers {
    MgritOptions forward_options, backward_options;
    std::unique_ptr<OdeForwardSteps<T>> forward_steps;
    std::unique_ptr<Mgrit<T>> forward;
    std::unique_ptr<OdeAdjointSteps<T>> adjoint_steps;
    std::unique_ptr<Mgrit<T>> adjoint;
    bool forward_warm = false, adjoint_warm = false;
    bool exact() const { return forward_options.levels == 1 && backward_options.levels == 1; }
  };
  std::unique_ptr<Solvers> make_solvers(MgritOptions forward, MgritOptions backward) const;
  static SampleBatch<T> images(V2<const T> x, V1<const int32_t> labels) {
    SampleBatch<T> b;
    b.samples = x.extent(0);
    b.features = x;
    b.targets = labels;
    return b;
  }
  // the whole pass on solvers s: the loss, the gradients (zeroed first), the statistics
  LayerParallelResult run(Solvers& s, const SampleBatch<T>& batch, int64_t global_batch);
  MgritStats solve_forward(Solvers& s, const SampleBatch<T>& batch);
  // the last layer rank's loss and correct count, summed over the layer group and the
  // replicas (the network keeps what its backward needs)
  LossSums loss_and_accuracy(Solvers& s, const SampleBatch<T>& batch);
  V2<const T> last_state(Solvers& s) const {
    return s.forward_steps->as_state(V1<const T>(s.forward->point(s.forward->points())));
  }
  // the exact gradient of the batch beside the one just made, and the control's decision
  GradientCheck check(const SampleBatch<T>& batch, int64_t global_batch);
  void act();

  OdeNetwork<T>& net_;
  const Grid& grid_;
  Comm& layers_;
  Comm& data_;
  Comm* embedding_;  // the first and the last layer rank, for the tied embedding (else null)
  LayerParallelOptions opt_;
  int64_t batch_;
  std::vector<int64_t> bounds_;              // the layer ranks' blocks of steps
  std::unique_ptr<Solvers> active_, exact_;  // the solves training runs; the checks' one-level solves
  Tensor1<T> inexact_grads_;                 // a check step's own gradient, kept while the exact one is made
  int64_t acted_at_ = -1;
  LayerParallelResult last_;
};

}  // namespace strata
