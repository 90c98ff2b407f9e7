#pragma once
// What the trainer asks of a driver, for any StageModel: train a run of steps (forward,
// backward, reduced gradients and the update), evaluate without a backward. Data
// parallelism and the flushing pipeline schedules take one step at a time and apply the
// update after it; XPipe streams several steps and applies it per stage inside the stream
// (PipelineEngine overrides train_steps). DataParallel, PipelineEngine and LayerParallel
// implement it.
#include <functional>
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

  // batch: the data replica's batch.samples samples of global_batch. Zeroes the gradients
  // first and leaves them reduced over the replicas (and the stages' copies).
  virtual BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) = 0;
  virtual BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) = 0;
  // Bytes of activations (and message buffers) this rank holds for its forward/backward.
  virtual int64_t activation_bytes() const = 0;
  // Bytes of weights kept beside the parameter store (XPipe: the true weights while a
  // prediction is in place).
  virtual int64_t weight_copy_bytes() const { return 0; }

  // The most steps one train_steps call takes (1 but for streaming schedules).
  virtual int64_t max_steps_per_call() const { return 1; }
  // Steps first_step, first_step + 1, ..., one batch each. Returns one outcome per step
  // trained: fewer than batches when stop_requested (asked at the updates) ended a stream
  // early.
  virtual std::vector<StepOutcome> train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                               int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                               const std::function<bool()>& stop_requested) {
    (void)stop_requested;  // a step is not interrupted
    std::vector<StepOutcome> out;
    for (size_t k = 0; k < batches.size(); ++k) {
      const BatchResult r = forward_backward(batches[k], global_batch, timers);
      timers.start("optimizer");
      StepOutcome o = update.apply(model_.params(), first_step + int64_t(k), r.loss);
      timers.stop("optimizer");
      o.correct = r.correct;
      out.push_back(o);
    }
    return out;
  }

 protected:
  StageModel<T>& model_;
};

}  // namespace strata
