#pragma once
// What the planner predicts of a layout (plan/step_prediction.hpp makes it): one step's
// time, memory and traffic, and a rank's memory alone.
#include <cstdint>
#include <vector>

#include "comm/traffic.hpp"
#include "plan/layout.hpp"

namespace strata {

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

}  // namespace strata
