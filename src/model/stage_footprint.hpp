#pragma once
// What a stage declares about itself without running: its parameters and place, the
// shapes it passes on, and what one micro-batch costs it in messages and memory. The
// planner reads a stage only through this (its dry models allocate nothing); the engines
// read it too, through StageModel (model/stage_model.hpp). Declarations only: nothing
// here changes the stage.
#include <cstdint>
#include <utility>

#include "comm/traffic.hpp"
#include "model/block_context.hpp"
#include "parallel/stage_placement.hpp"
#include "parallel/tensor_parallel.hpp"
#include "state/param_store.hpp"
#include "state/stage_units.hpp"

namespace strata {

// The bytes one micro-batch of a context holds on a stage's chunk, beside the parameters.
struct StageMemory {
  int64_t cache = 0;         // one cache after a forward and backward
  int64_t weight_pass = 0;   // on top of cache once backward_input has run (what backward_weight reads)
  int64_t shared_cache = 0;  // the loss layer's cache kept once for all micro-batches (0: not shared)
  int64_t workspace = 0;     // the stage's workspace after a training step (StageModel::workspace_bytes)
};

template <class T>
class StageFootprint : public StageUnits<T> {
 public:
  virtual const ParamStore<T>& params() const = 0;
  virtual const StagePlacement& placement() const = 0;
  // The tensor split inside the stage (Serial for a model without one).
  virtual const TensorParallel& tensor_parallel() const = 0;
  // Loss terms per sample.
  virtual int64_t targets_per_sample() const = 0;
  BlockContext context(int64_t samples) const { return {samples, targets_per_sample()}; }
  // (rows, columns) of what a forward on ctx passes to the next stage (and of its gradient) on this rank.
  virtual std::pair<int64_t, int64_t> boundary_shape(const BlockContext& ctx) const = 0;
  // What one micro-batch's forward and backward on this stage (its chunk) sends
  // (comm/traffic.hpp), call for call.
  virtual void micro_batch_traffic(const BlockContext& ctx, Traffic& out, int chunk = 0) const = 0;
  // What one micro-batch of ctx holds on this stage's chunk; loss_cache_shared: the engine
  // runs one forward at a time (StageModel::share_loss_layer_cache), so the loss layer's
  // cache is held once (shared_cache) rather than in every cache.
  virtual StageMemory memory_for(const BlockContext& ctx, int chunk = 0, bool loss_cache_shared = false) const = 0;
};

}  // namespace strata
