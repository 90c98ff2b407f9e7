#include "engine/pipeline/pipeline_engine.hpp"

#include <stdexcept>

#include "engine/pipeline/simulate.hpp"
#include "optim/unit_gradient_sum.hpp"
#include "optim/zero_sharding.hpp"

namespace strata {

template <class T>
PipelineEngine<T>::PipelineEngine(StageModel<T>& model, const Grid& grid, Schedule schedule, int micro_batches,
                                  const VariabilityConfig& variability)
    : Engine(model, grid,
             forward_only_schedule(int(grid.shape().pipeline), micro_batches, model.placement().chunk_count())),
      expert_data_(grid.expert_replicas()), pipe_(grid.pipeline()), embedding_(grid.embedding()) {
  if (schedule == Schedule::XPipe)
    throw std::logic_error("PipelineEngine runs flushing schedules; XPipe is XPipeEngine");
  const int stages = int(grid.shape().pipeline), chunks = model.placement().chunk_count();
  list_ = make_schedule(schedule, stages, micro_batches, 1, chunks);
  const PipeSimulation sim = simulate_schedule(list_);
  if (sim.deadlock) throw std::logic_error("pipeline schedule deadlocks: " + sim.deadlock_report);
  executor_.set_dispatch(grid.shape().dispatch, &grid.stage_peers(), int(grid.shape().dispatch_in_flight));
  executor_.set_delays(PassDelays(variability, model.placement().stage));
  model_.share_loss_layer_cache(stages > 1 && one_forward_at_a_time(list_.programs[size_t(model.placement().stage)]));
}

template <class T>
BatchResult PipelineEngine<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  auto& store = model_.params();
  store.zero_grads();
  if (store.zero().gradients_sharded()) {  // ZeRO-2: each unit summed over the replicas as the backwards make it final
    UnitGradientSum<T> unit_sum(data_, expert_data_, store);
    const ListSums sums = executor_.run(list_, {batch}, global_batch, timers, nullptr,
                                        [&](int64_t offset, int64_t count) { unit_sum.ready(offset, count); });
    timers.start("grad_allreduce");
    unit_sum.finish();
    if (embedding_ &&
        model_.params().table().tied_index() >= 0)  // its two copies' parts (the same unit on both end stages)
      embedding_->allreduce_sum(unit_sum.owned_grads_of(model_.params().table().tied_index()));
    const BatchResult result = sum_over_stages(model_, pipe_, data_, sums.loss[0], sums.correct[0], global_batch);
    timers.stop("grad_allreduce");
    return result;
  }
  const ListSums sums = executor_.run(list_, {batch}, global_batch, timers);
  timers.start("grad_allreduce");
  if (embedding_ && model_.params().table().tied_index() >= 0)
    embedding_->allreduce_sum(store.grad(model_.params().table().tied_index()));  // its two copies
  sum_gradients(data_, expert_data_, store);                     // all of them, or with ZeRO-1 this rank's block
  const BatchResult result = sum_over_stages(model_, pipe_, data_, sums.loss[0], sums.correct[0], global_batch);
  timers.stop("grad_allreduce");
  return result;
}

template class PipelineEngine<float>;
template class PipelineEngine<double>;

}  // namespace strata
