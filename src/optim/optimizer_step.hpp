#pragma once
// The one update path, owned by the run loop: clipping by the global gradient norm, the
// step's learning rate (warm-up, cosine decay) and AdamW. Data parallelism and the
// flushing pipeline schedules apply it once per step, after the gradients are reduced;
// XPipe applies it per stage at the OptimizerStep instructions of its stream, clipping by
// the stage's own gradient norm. A step whose loss or gradient norm is not finite is
// never applied.
#include "comm/comm.hpp"
#include "core/deck.hpp"
#include "optim/adamw.hpp"
#include "optim/optimizer_groups.hpp"
#include "state/param_store.hpp"

namespace strata {

// One optimizer step as the loop sees it. `applied`: the update was made.
struct StepOutcome {
  double loss = 0, grad_norm = 0;
  bool applied = true;
  int64_t correct = 0;  // classifiers: samples of the step's batch predicted right
};

template <class T>
class OptimizerStep {
 public:
  // total_steps: the run's, for the learning-rate schedule; groups: the ranks the update
  // talks to (optimizer_groups.hpp; all null for a model on one rank).
  OptimizerStep(const OptimConfig& cfg, int64_t total_steps, const OptimizerGroups& groups)
      : cfg_(cfg), total_steps_(total_steps), model_group_(groups.model), zero_group_(groups.zero),
        expert_group_(groups.experts), expert_replicas_(groups.expert_replicas), adamw_(cfg) {}

  const OptimConfig& config() const { return cfg_; }
  AdamW<T>& adamw() { return adamw_; }
  double lr(int64_t step) const { return lr_at_step(cfg_, step, total_steps_); }

  // The whole model's update for (0-based) step, from store's reduced gradients.
  StepOutcome apply(ParamStore<T>& store, int64_t step, double loss) {
    return update(store, step, loss, model_group_, zero_group_, -1);
  }
  // One pipeline stage's update inside a stream: the norm of the stage's gradient over
  // its tensor group (nullptr: none); `frozen`, a parameter left alone (-1: none). Never
  // with ZeRO-1 (the deck refuses it with XPipe).
  StepOutcome apply_stage(ParamStore<T>& store, int64_t step, Comm* tensor_group, int frozen) {
    return update(store, step, 0.0, tensor_group, nullptr, frozen);
  }

 private:
  StepOutcome update(ParamStore<T>& store, int64_t step, double loss, Comm* norm_group, Comm* zero, int frozen);

  OptimConfig cfg_;
  int64_t total_steps_;
  Comm* model_group_;
  Comm* zero_group_;
  Comm* expert_group_;
  Comm* expert_replicas_;
  AdamW<T> adamw_;
};

}  // namespace strata
