#pragma once
// What one stage's model costs, for the step predictions (plan/step_prediction.hpp) and
// the layer-parallel ones (plan/layer_parallel_prediction.hpp): its products' seconds and
// one rank's state and activation bytes.
#include <cstdint>
#include <utility>

#include "core/deck_choices.hpp"
#include "engine/pipeline/schedule.hpp"
#include "model/block_context.hpp"
#include "model/stage_model.hpp"
#include "optim/zero3_gathers.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"

namespace strata {

template <class T>
class GPT;

// Attention's products, fused: at the machine's attention rate on the kernel's own count
// where the machine file gives one, else at the GEMM rate on the model's count.
double attention_seconds(const GPT<float>& model, const BlockContext& micro, const MachineFile& m,
                         Precision precision);
// Seconds of a stage's matrix products for one micro-batch: the dense ones at the GEMM
// rate, attention's at the fused kernel's rate where the machine file gives one (else at
// the GEMM rate, the model's full T x T count).
double product_seconds(const GPT<float>& model, const BlockContext& micro, const MachineFile& m, Precision precision);

// The replicas ZeRO-1 splits the moments over (1: no split).
inline int zero_shards(const Layout& l) { return l.zero > 0 ? l.replicas() : 1; }

// (state, activation) bytes of one rank of a stage: parameters, gradients and AdamW
// moments (with ZeRO-1 over `zero_shards` data ranks: a block of them, the buffers padded;
// XPipe: and the true weights under a prediction; the parameters rounded to bf16 when
// kept); the activation caches of the
// micro-batches in flight per chunk, as the pipeline engine sizes them from the stage's
// list (one cache without a pipeline), the shared loss-layer cache, and the message rings.
std::pair<int64_t, int64_t> stage_memory(const StageFootprint<float>& model, const PipeSchedule* schedule,
                                         const BlockContext& micro, bool xpipe, int zero_shards, int zero,
                                         int micro_batches, bool rounded_copy, GatherPolicy policy,
                                         Dispatch dispatch = Dispatch::Order, int in_flight_cap = 0);

}  // namespace strata
