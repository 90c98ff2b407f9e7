#pragma once
// What one training step of a deck costs under a layout on a machine, predicted from the
// engine's own pieces rather than a second model of the network:
//  - parameters per rank: the model's ParamStore declarations (a GPT declared without
//    memory for each pipeline stage, with the layout's tensor split);
//  - activations: the caches' sizes as the blocks allocate them (StageFootprint::memory_for)
//    times the micro-batches the schedule keeps in flight (its unit-cost simulation, as
//    the pipeline engine sizes its slots), plus the pipeline's message buffers;
//  - communication: the traffic every operator, block and driver declares beside its
//    implementation (comm/traffic.hpp), which the validation checks call for call
//    against Comm's counters;
//  - time: the stage's FLOPs at the machine's GEMM rate (attention's at its fused
//    kernel's rate, where the machine file gives one), its activation bytes streamed a
//    few times at its memory bandwidth, each collective at alpha-beta costs of the links
//    its group spans, and the pipeline schedule simulated with those costs (bubble,
//    transfers, stage imbalance) followed by the gradient sums and the optimizer.
#include "comm/traffic.hpp"
#include "optim/zero_sharding.hpp"
#include "plan/layer_parallel_prediction.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"
#include "plan/prediction.hpp"

namespace strata {

class DryModels;

// models, here and below: the stage models of a search (plan/dry_models.hpp; nullptr:
// each built afresh).
MemoryPrediction predict_memory(const Deck& deck, const Layout& layout, DryModels* models = nullptr);

// The traffic of one rank of pipeline stage `stage` in one round of the trainer: one step
// for data parallelism, GPipe and 1F1B; a stream of `stream_steps` steps for XPipe.
// node_sum: how the layout sums over its replicas (node by node: Links::node_sum).
Traffic stage_traffic(const Deck& deck, const Layout& layout, int stage, int stream_steps = 1,
                      DryModels* models = nullptr, NodeSum node_sum = {});

// stream_steps: XPipe's stream length to time (0: its steady state, streams without end).
StepPrediction predict_step(const Deck& deck, const Layout& layout, const MachineFile& machine, int stream_steps = 0,
                            DryModels* models = nullptr);

}  // namespace strata
