#pragma once
// What the run asks of a driver, for any StageModel: train a run of steps (forward,
// backward, reduced gradients and the updates), evaluate without a backward. Engines that
// take one step at a time and apply the update after it (data parallelism, the flushing
// pipeline schedules, MGRIT) are StepEngines; XPipe streams several steps and applies the
// updates per stage inside the stream (XPipeEngine). make_engine chooses.
#include <functional>
#include <string>
#include <vector>

#include "core/timers.hpp"
#include "model/stage_model.hpp"
#include "optim/optimizer_step.hpp"

namespace strata {

// What a forward (and backward) of a global batch reports, the same on every rank.
struct BatchResult {
  double loss = 0;      // global mean loss
  int64_t correct = 0;  // samples predicted right in the global batch (models that count them, else 0)
};

template <class T>
class TrainEngine {
 public:
  explicit TrainEngine(StageModel<T>& model) : model_(model) {}
  virtual ~TrainEngine() = default;

  // The most steps one train_steps call takes (1 but for streaming schedules).
  virtual int64_t max_steps_per_call() const { return 1; }
  // Steps first_step, first_step + 1, ..., one batch each (the data replica's
  // batch.samples samples of global_batch). Returns one outcome per step trained: fewer
  // than batches when stop_requested (asked at the updates) ended a stream early.
  virtual std::vector<StepOutcome> train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                               int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                               const std::function<bool()>& stop_requested) = 0;
  virtual BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) = 0;
  // Bytes of activations (and message buffers) this rank holds for its forward/backward.
  virtual int64_t activation_bytes() const = 0;
  // Bytes of weights kept beside the parameter store (XPipe: the true weights while a
  // prediction is in place).
  virtual int64_t weight_copy_bytes() const { return 0; }

  // The run could restart at this step (a checkpoint was written before it): the engine
  // forgets what a restart would not have (MGRIT's warm start), so that the run is the
  // same bit for bit whether or not it restarted here.
  virtual void at_restart_point() {}
  // What the engine adds to the run's description and figures: the layout's detail beyond
  // parallel.* (MGRIT's levels, coarsening, relaxation, iterations); metrics.csv columns
  // after the model's; the progress line's fields after the model's, with their row values.
  virtual std::string layout_detail() const { return ""; }
  virtual std::vector<std::string> metric_columns() const { return {}; }
  virtual std::string progress(std::vector<double>& row) const {
    (void)row;
    return "";
  }
  // What the engine has decided during the run that a restart must continue with (MGRIT's
  // gradient control: switched to exact solves, or tightened), as a checkpoint attribute
  // ("" for nothing); and its restore from a checkpoint's.
  virtual std::string checkpoint_state() const { return ""; }
  virtual void restore_state(const std::string& state) { (void)state; }

 protected:
  StageModel<T>& model_;
};

// An engine that trains one step at a time: forward_backward, then the update.
template <class T>
class StepEngine : public TrainEngine<T> {
 public:
  using TrainEngine<T>::TrainEngine;
  // Zeroes the gradients first and leaves them reduced over the replicas (and the stages' copies).
  virtual BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) = 0;

  std::vector<StepOutcome> train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                       int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                       const std::function<bool()>& stop_requested) final {
    (void)stop_requested;  // a step is not interrupted
    std::vector<StepOutcome> out;
    for (size_t k = 0; k < batches.size(); ++k) {
      step_ = first_step + int64_t(k);
      const BatchResult r = forward_backward(batches[k], global_batch, timers);
      timers.start("optimizer");
      StepOutcome o = update.apply(this->model_.params(), first_step + int64_t(k), r.loss);
      timers.stop("optimizer");
      o.correct = r.correct;
      out.push_back(o);
    }
    return out;
  }

 protected:
  int64_t step_ = 0;  // the step forward_backward runs (0-based; train_steps sets it)
};

}  // namespace strata
