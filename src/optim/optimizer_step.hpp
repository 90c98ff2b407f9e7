#pragma once
// The one update path, owned by the run loop: clipping by the global gradient norm, the
// step's learning rate (warm-up, cosine decay) and AdamW. Data parallelism and the
// flushing pipeline schedules apply it once per step, after the gradients are reduced;
// XPipe applies it per stage at the OptimizerStep instructions of its stream, clipping by
// the stage's own gradient norm. A step whose loss or gradient norm is not finite is
// never applied.
#include "comm/comm.hpp"
#include "core/deck.hpp"
#include "model/param_store.hpp"
#include "optim/adamw.hpp"

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
  // model_group: the ranks over which one model replica's gradient norm is summed
  // (pipeline x tensor; nullptr for a model on one rank). total_steps: the run's, for the
  // learning-rate schedule. zero_group: with ZeRO-1 (a store whose moments are sharded),
  // the data group that holds the other blocks (optim/zero_sharding.hpp); else nullptr.
  // expert_group: with expert parallelism, the ranks that hold the other experts
  // (their gradients' squares are summed over it; with ZeRO-1 the replicas' sum covers
  // them) and expert_replicas, those that hold the same experts (ZeRO-1 gathers the
  // experts' region over it); else nullptr.
  OptimizerStep(const OptimConfig& cfg, int64_t total_steps, Comm* model_group, Comm* zero_group = nullptr,
                Comm* expert_group = nullptr, Comm* expert_replicas = nullptr)
      : cfg_(cfg), total_steps_(total_steps), model_group_(model_group), zero_group_(zero_group),
        expert_group_(expert_group), expert_replicas_(expert_replicas), adamw_(cfg) {}

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
