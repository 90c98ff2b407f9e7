#pragma once
// Where a training job's batches come from, whatever the model: a data replica's share of
// a global batch, on the device, as the engines take it (SampleBatch). Token text, token
// shards and random tokens (token_batches.hpp) and images (image_batches.hpp) implement it.
//
// One rule says which samples each replica gets (replica_sample): local sample i of
// replica d is in local micro-batch j = i / per_micro, and local micro-batch j is d's part
// of global micro-batch j. So every micro-batch holds the same samples on any number of
// replicas (XPipe runs the micro-batches of one step on different weight versions), and
// with one micro-batch a replica's samples are one contiguous block.
#include <cstdint>
#include <limits>
#include <string>

#include "io/token_source.hpp"
#include "model/make_model.hpp"
#include "model/stage_model.hpp"

namespace strata {

// A data replica's place in the global batch.
struct BatchShape {
  int64_t global_batch = 1;   // samples per step, all replicas together
  int64_t replicas = 1;       // data-parallel replicas
  int64_t replica = 0;        // this one
  int64_t micro_batches = 1;  // the step's micro-batches (parallel.micro_batches)
  int64_t local_batch() const { return global_batch / replicas; }
};

// The global index of local sample i (see above).
inline int64_t replica_sample(const BatchShape& s, int64_t i) {
  const int64_t per_micro = s.local_batch() / s.micro_batches;
  return (i / per_micro) * per_micro * s.replicas + s.replica * per_micro + i % per_micro;
}

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // This replica's share of (split, step), loaded into `slot` (a round of several steps
  // keeps one slot per step; a slot's views stay valid until it is loaded again).
  virtual SampleBatch<float> load(Split split, int64_t step, int slot) = 0;
  virtual DataShape shape() const { return {}; }
  // One line for the log about the data ("" when there is nothing to say).
  virtual std::string describe() const = 0;
  // Bytes of text the targets of the first `batches` global batches of split stand for
  // (bits per byte), counted once over the global batch; NaN when unknown.
  virtual double text_bytes(Split split, int64_t batches) const {
    (void)split;
    (void)batches;
    return std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace strata
