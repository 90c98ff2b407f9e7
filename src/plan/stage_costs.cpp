#include "plan/stage_costs.hpp"

#include <algorithm>

#include "engine/pipeline/ready_dispatch.hpp"
#include "engine/pipeline/simulate.hpp"
#include "model/gpt.hpp"
#include "optim/unit_gradient_sum.hpp"
#include "plan/engine_traffic.hpp"

namespace strata {

// Attention's products, fused: at the machine's attention rate on the kernel's own count
// where the machine file gives one, else at the GEMM rate on the model's count.
double attention_seconds(const GPT<float>& model, const BlockContext& micro, const MachineFile& m,
                         Precision precision) {
  const double rate = m.attention_rate(precision);
  return rate > 0 ? model.attention_kernel_flops(micro) / rate
                  : model.attention_model_flops(micro) / m.gemm_rate(precision);
}

double product_seconds(const GPT<float>& model, const BlockContext& micro, const MachineFile& m, Precision precision) {
  return (model.stage_flops(micro) - model.attention_model_flops(micro)) / m.gemm_rate(precision) +
         attention_seconds(model, micro, m, precision);
}

// (state, activation) bytes of one rank of a stage: parameters, gradients and AdamW
// moments (with ZeRO-1 over `zero_shards` data ranks: a block of them, the buffers padded;
// XPipe: and the true weights under a prediction; the parameters rounded to bf16 when
// kept); the activation caches of the
// micro-batches in flight per chunk, as the pipeline engine sizes them from the stage's
// list (one cache without a pipeline), the shared loss-layer cache, and the message rings.
std::pair<int64_t, int64_t> stage_memory(const StageFootprint<float>& model, const PipeSchedule* schedule,
                                         const BlockContext& micro, bool xpipe, int zero_shards, int zero,
                                         int micro_batches, bool rounded_copy, GatherPolicy policy, Dispatch dispatch,
                                         int in_flight_cap) {
  const StageProgram* program = schedule ? &schedule->programs[size_t(model.placement().stage)] : nullptr;
  const bool shared_loss_cache = program && one_forward_at_a_time(*program);  // as the pipeline engine decides it
  const auto& store = model.params();
  const int64_t numel = store.numel(), dense = store.expert_begin(), experts = numel - dense;
  int64_t padded = zero_block(numel, zero_shards) * zero_shards;  // the parameters' buffer
  int64_t values = store_values(numel, zero_shards);
  const auto& tp = model.tensor_parallel();
  const int e = std::max(1, store.table().expert_split() / tp.traits().expert_ways);
  if (zero >= 2 && zero_shards > 1) {
    // ZeRO-2 (ParamStore::shard_gradients): the parameters unit by unit, each padded; this
    // rank's part of each unit's gradients and moments; the slots of the units in the works
    // (ZeRO-3, shard_parameters: the parameters' part too, and the gathered units' slots)
    const auto units = zero2_units(model, zero_shards);
    const bool split =
        program && std::any_of(program->begin(), program->end(), [](const PipeInstr& in) {
          return in.op == PipeOp::BackwardInput;
        });  // the zero-bubble schedules' halves (a flushing list's backwards are whole: one per micro-batch)
    int64_t owned = 0;
    for (const auto& u : units) owned += u.part();
    padded = units.empty() ? 0 : units.back().end;
    const int64_t params =
        zero == 3
            ? owned + zero3_gathers(model, units,
                                    program ? stage_passes(*program) : data_parallel_passes(micro_batches), policy)
                          .slot_values
            : padded;
    values = params + 3 * owned +
             zero2_slot_values(model, units, split ? stage_backwards(*program) : whole_backwards(micro_batches));
  } else if (zero_shards > 1 && e > 1 && experts > 0) {
    // ZeRO-1 over two regions (ParamStore::shard_moments): the experts' over the expert replicas
    const int64_t block = zero_block(dense, zero_shards), expert_block = zero_block(experts, zero_shards / e);
    padded = block * zero_shards + expert_block * (zero_shards / e);
    values = 2 * padded + 2 * (block + expert_block);
  }
  const int64_t state =
      (values + (xpipe ? numel : 0)) * int64_t(sizeof(float)) + (rounded_copy ? padded * int64_t(sizeof(uint16_t)) : 0);
  const StageMemory first = model.memory_for(micro, 0, shared_loss_cache);
  if (!program) return {state, first.cache + first.workspace};
  // per chunk: its caches, and its message rings (slots + 1 each way) and staging (slots each way)
  const auto [rows, cols] = model.boundary_shape(micro);
  int64_t activations = first.shared_cache + first.workspace;
  for (int c = 0; c < schedule->virtual_stages; ++c) {
    const int64_t slots = cache_slots(*program, c, dispatch, in_flight_cap);
    activations += slots * model.memory_for(micro, c, shared_loss_cache).cache +
                   (4 * slots + 2) * rows * cols * int64_t(sizeof(float));
  }
  return {state, activations};
}

}  // namespace strata
