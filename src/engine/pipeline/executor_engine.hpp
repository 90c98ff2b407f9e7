#pragma once
// What the two pipeline engines (PipelineEngine: the flushing schedules; XPipeEngine:
// streams) share: the StageExecutor that runs their lists, the replicas' communicator,
// and evaluation, a forward-only list run by the same executor, whose caches and messages
// are the activations they report. Base is the engine interface each implements
// (StepEngine or TrainEngine).
#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/pipeline/stage_executor.hpp"
#include "engine/train_engine.hpp"
#include "model/stage_model.hpp"

namespace strata {

template <class T, class Base>
class ExecutorEngine : public Base {
 public:
  BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) override {
    return executor_.evaluate(evaluation_, batch, global_batch, data_);
  }
  // the caches of the micro-batches in flight, and the messages
  int64_t activation_bytes() const override { return executor_.activation_bytes(); }

 protected:
  // evaluation: the forward-only list (forward_only_schedule) for the model's stage.
  ExecutorEngine(StageModel<T>& model, const Grid& grid, PipeSchedule evaluation)
      : Base(model), data_(grid.replicas()), evaluation_(std::move(evaluation)), executor_(model, grid.pipeline()) {}

  Comm& data_;  // the data replicas of this stage
  PipeSchedule evaluation_;
  StageExecutor<T> executor_;
};

}  // namespace strata
