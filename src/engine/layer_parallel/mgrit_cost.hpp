#pragma once
// What an MGRIT solve costs: Mgrit::solve() replayed on every rank of a layout at once,
// counting what each rank does the way the solver counts it (MgritStats::steps and
// ::messages; the tests check the two agree exactly, rank by rank) and timing the run
// with a step costing t_step and a state message t_message from send to arrival. The
// sweeps follow the solver's order on each rank: the last point is sent first (a C-point
// at once, an F-point after its interval), then the rank's other intervals, then the
// points that continue the previous rank's interval once its message is in; so a coarse
// interval spread over ranks costs a chain of steps and messages. The residual norm's
// all-reduce is a barrier; vector operations and the barrier's own latency are not
// counted. Every level's step costs the same (a coarse step is one step of size c^l h).
#include <cstdint>
#include <vector>

#include "engine/layer_parallel/mgrit.hpp"

namespace strata {

struct MgritCost {
  std::vector<std::vector<int64_t>> steps;  // [rank][level]: step evaluations
  std::vector<int64_t> messages;            // [rank]: states sent
  double time = 0;                          // when the last rank finishes
};

// options.max_iterations V-cycles (tolerance not consulted: every cycle runs), or one
// sequential solve with one level; the final ghost exchange included.
MgritCost mgrit_cost(const MgritLayout& layout, const MgritOptions& options, double t_step, double t_message);

// What a layer-parallel network's pieces cost (measured, or predicted from FLOPs), in seconds.
struct LayerStepTimes {
  double forward = 0;      // one step forward
  double adjoint = 0;      // one adjoint step without weight gradients (the GPT: the block's forward, then its input half)
  double gradient = 0;     // one step of the gradient pass (the same with the weight gradients)
  double open = 0;         // the opening part, forward and backward (the GPT: embedding and open buffer)
  double close = 0;        // the closing part, forward and backward (the GPT: close buffer, head and loss)
  double message = 0;      // one state from one layer rank to the next
  double serial_step = 0;  // one step forward and backward in the serial network (activations kept)
};

// One batch of LayerParallel on `ranks` layer ranks (balanced blocks of `steps` steps):
//   open + forward solve (forward, message) + close + adjoint solve (adjoint, message)
//   + the largest block's gradient pass,
// each solve the replay's critical path. The serial network: open + close + steps x serial_step.
double layer_parallel_seconds(int64_t steps, int ranks, const MgritOptions& forward, const MgritOptions& backward,
                              const LayerStepTimes& t);
inline double serial_network_seconds(int64_t steps, const LayerStepTimes& t) {
  return t.open + t.close + double(steps) * t.serial_step;
}

}  // namespace strata
