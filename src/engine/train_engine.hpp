#pragma once
// What the trainer asks of a driver: one forward+backward over this rank's share of a
// global batch, leaving the reduced gradients ready for the optimizer, and an evaluation
// without backward. DataParallel and PipelineEngine implement it for any StageModel.
#include "core/timers.hpp"
#include "model/stage_model.hpp"

namespace strata {

// What a forward (and backward) of a global batch reports, the same on every rank.
struct BatchResult {
  double loss = 0;      // global mean loss
  int64_t correct = 0;  // samples predicted right in the global batch (models that count them, else 0)
};

template <class T>
class TrainEngine {
 public:
  virtual ~TrainEngine() = default;
  // batch: the data replica's batch.samples samples of global_batch. Zeroes the gradients
  // first; the result is the same on every rank.
  virtual BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) = 0;
  virtual BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) = 0;
  // Bytes of activations (and message buffers) this rank holds for its forward/backward.
  virtual int64_t activation_bytes() const = 0;
};

}  // namespace strata
