#pragma once
// What one training step of a deck costs under a layout on a machine, predicted from the
// engine's own pieces rather than a second model of the network:
//  - parameters per rank: the model's ParamStore declarations (a GPT declared without
//    memory for each pipeline stage, with the layout's tensor split);
//  - activations: the caches' sizes as the blocks allocate them (StageModel::cache_bytes_for)
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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/traffic.hpp"
#include "engine/layer_parallel/mgrit_cost.hpp"
#include "model/block_context.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"

namespace strata {

template <class T>
class GPT;

struct StepPrediction {
  Layout layout;
  int64_t state_bytes = 0;       // parameters, gradients, AdamW moments (XPipe: and the saved weights)
  int64_t activation_bytes = 0;  // caches of the micro-batches in flight and pipeline messages
  int64_t memory_bytes() const { return state_bytes + activation_bytes; }  // on the fullest rank
  double wire_bytes = 0;  // sent per step by the busiest rank (bandwidth-optimal count)
  double compute_s = 0;   // per step on the busiest stage: GEMMs and elementwise passes
  double comm_s = 0;      // per step, communication not hidden behind computation
  double step_s = 0;
  double bubble = 0;                   // pipeline idle share (0 without stages)
  double model_flops = 0;              // per step, all ranks: 6N + 12 L T C per token (GPT::flops_per_token)
  std::vector<Traffic> stage_traffic;  // one rank of each stage: one step, or XPipe's stream of 2p+2
  std::vector<int64_t> stage_params;   // parameters one rank of each stage holds
  std::vector<int64_t> stage_state;    // each stage's parameters, gradients and moments (bytes, one rank)
  double memory_bound = 0;             // rank_layouts: the memory of the layout this one varies to fit (0: none)
  Layout varied;                       // ... and that layout
};

// Memory of the fullest rank under a layout, as predict_step counts it (its XPipe slots:
// the steady state's).
struct MemoryPrediction {
  int64_t state_bytes = 0, activation_bytes = 0;
};
MemoryPrediction predict_memory(const Deck& deck, const Layout& layout);

// The traffic of one rank of pipeline stage `stage` in one round of the trainer: one step
// for data parallelism, GPipe and 1F1B; a stream of `stream_steps` steps for XPipe.
Traffic stage_traffic(const Deck& deck, const Layout& layout, int stage, int stream_steps = 1);

// Seconds of a stage's matrix products for one micro-batch: the dense ones at the GEMM
// rate, attention's at the fused kernel's rate where the machine file gives one (else at
// the GEMM rate, the model's full T x T count).
double product_seconds(const GPT<float>& model, const BlockContext& micro, const MachineFile& m, Precision precision);

// While one lives, predict_step, predict_memory and stage_traffic build each stage model
// once per shape (the layout but its micro-batch count and ZeRO stage) and reuse it: for
// a search over the layouts of one deck (rank_layouts). Not thread-safe; the outermost
// one owns the cache.
class DryModelCache {
 public:
  DryModelCache();
  ~DryModelCache();
  DryModelCache(const DryModelCache&) = delete;
  DryModelCache& operator=(const DryModelCache&) = delete;

 private:
  std::map<std::string, std::shared_ptr<GPT<float>>> models_;
  bool owner_ = false;
};

// The MGRIT solves the planner replays for a layer-parallel layout (l.mgrit: the deck's
// [layerpar] options with l.levels, every V-cycle run, the steps balanced over the layer
// ranks): each layer rank's step evaluations per level and states sent, as the solvers
// count them (MgritStats), in the forward solve and in the adjoint's.
struct LayerParallelSolves {
  MgritCost forward, adjoint;  // both indexed by layer rank
};
LayerParallelSolves planned_solves(const Deck& deck, const Layout& layout);

// stream_steps: XPipe's stream length to time (0: its steady state, streams without end).
StepPrediction predict_step(const Deck& deck, const Layout& layout, const MachineFile& machine, int stream_steps = 0);

}  // namespace strata
