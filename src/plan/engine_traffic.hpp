#pragma once
// What each engine sends on one rank in one step (comm/traffic.hpp), call for call, as the
// planner prices it: read off the model's declarations, the engine's gradient buckets and
// the stage's instruction list (schedule.hpp), as the engines execute them.
// bench/plan_check compares these declarations with what a run counts.
#include "comm/traffic.hpp"
#include "engine/pipeline/schedule.hpp"
#include "model/stage_model.hpp"
#include "optim/unit_gradient_sum.hpp"
#include "optim/zero_sharding.hpp"
#include "state/param_gather.hpp"

namespace strata {

// What one forward_backward of DataParallel sends on one rank (comm/traffic.hpp), call
// for call: the model's tensor-parallel traffic (per micro-batch) and the data group's
// gradient buckets; zero (the ZeRO stage): 1, ZeRO-1's reduce-scatter, norm and all-gather
// instead; 2, each unit's reduce-scatter per micro-batch, the norm and each unit's all-gather;
// 3, ZeRO-2's sums and each unit's gathers as the passes under `policy` make them
// (optim/zero3_gathers.hpp). node_sum.per_node > 0: the gradients summed node by node,
// per_node replicas a node (parallel.grad_sum = "nodes"; no buckets then, as the driver runs it).
template <class T>
Traffic data_parallel_traffic(const StageFootprint<T>& model, int data_ranks, double bucket_bytes, int64_t local_batch,
                              int micro_batches = 1, int zero = 0, GatherPolicy policy = {}, NodeSum node_sum = {});

// What the stage the model is placed on sends in one run of s (StageExecutor), call for
// call: one mini-batch for the flushing schedules with the gradient sums after it, a
// stream of s.mini_batches for XPipe with its in-stream updates and the sums at its end.
// zero (the ZeRO stage): ZeRO-1's, ZeRO-2's or ZeRO-3's sums and gathers (flushing schedules only).
template <class T>
Traffic pipeline_traffic(const StageFootprint<T>& model, const PipeSchedule& s, int data_ranks, int64_t local_batch,
                         int zero = 0, GatherPolicy policy = {}, NodeSum node_sum = {});
// The passes (chunk, backward) a stage's list runs in one step, in order (ZeRO-3's gathers).
std::vector<std::pair<int, bool>> stage_passes(const StageProgram& program);
// The backwards a stage's list runs in one step, whole or by halves, in order (ZeRO-2's slots).
std::vector<BackwardPart> stage_backwards(const StageProgram& program);

}  // namespace strata
