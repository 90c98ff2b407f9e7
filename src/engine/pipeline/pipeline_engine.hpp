#pragma once
// The flushing pipeline schedules (GPipe, 1F1B, interleaved, ZB-H1, ZB-H2): one
// mini-batch per forward_backward(), run by the StageExecutor over the schedule's list;
// afterwards the two copies of the tied embedding (first and last stage) and the data
// replicas sum their gradients, and the run updates every stage at once. Evaluation runs
// the executor over a forward-only list. XPipe, which streams without a flush, is
// XPipeEngine (xpipe_engine.hpp).
#include "engine/pipeline/executor_engine.hpp"

namespace strata {

template <class T>
class PipelineEngine : public ExecutorEngine<T, StepEngine<T>> {
 public:
  // model: this rank's stage (its placement's stage of grid.shape().pipeline); a flushing
  // schedule with micro_batches micro-batches per mini-batch.
  // The stage picks its passes as grid.shape().dispatch says; variability: the delays
  // injected after its passes ([variability]).
  PipelineEngine(StageModel<T>& model, const Grid& grid, Schedule schedule, int micro_batches,
                 const VariabilityConfig& variability = {});

  // One mini-batch; the gradients are left summed for the run's update.
  BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) override;

 private:
  using Engine = ExecutorEngine<T, StepEngine<T>>;
  using TrainEngine<T>::model_;
  using Engine::data_;
  using Engine::executor_;
  Comm& expert_data_;  // the ranks that hold the same experts (Grid::expert_replicas())
  Comm& pipe_;         // the stages of this replica, ranked by stage
  Comm* embedding_;    // first and last stage (tied embedding), if p > 1
  PipeSchedule list_;
};

}  // namespace strata
