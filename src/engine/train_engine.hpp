#pragma once
// What the trainer asks of a driver: one forward+backward over this rank's share of a
// global batch, leaving the reduced gradients ready for the optimizer, and an evaluation
// without backward. DataParallel and PipelineEngine implement it.
#include "core/tensor.hpp"
#include "core/timers.hpp"

namespace strata {

template <class T>
class TrainEngine {
 public:
  virtual ~TrainEngine() = default;
  // tokens, targets: the data replica's local_batch sequences. Zeroes the gradients
  // first; returns the global mean loss (the same on every rank).
  virtual double forward_backward(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                                  int64_t global_batch, Timers& timers) = 0;
  virtual double evaluate(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                          int64_t global_batch) = 0;
  // Bytes of activations (and message buffers) this rank holds for its forward/backward.
  virtual int64_t activation_bytes() const = 0;
};

}  // namespace strata
