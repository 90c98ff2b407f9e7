#pragma once
// What one MGRIT V-cycle costs a rank, counted the way mgrit.cpp runs it (the solver's
// own counters, MgritStats::steps and ::messages, are tested against this exactly), and a
// time model for the critical path built on it.
//
// With block B_l = N / (P c^l) steps per rank on level l (L levels):
//   level 0: relaxation F: B_0 (c-1)/c steps, FCF: B_0 (2(c-1)+1)/c; the residual and the
//            FAS right-hand side: one level-0 and one level-1 step per coarse point (B_1
//            each); after the correction an F-relaxation: B_0 (c-1)/c
//   level 0 < l < L-1: the same with FCF relaxation (and the residual's B_{l+1} steps on
//            levels l and l+1)
//   level L-1: the sequential solve, B_{L-1} steps per rank, but a chain through all P
//            ranks: P B_{L-1} = N / c^{L-1} step times on the critical path.
// Messages: one state per relaxation sweep and per sequential solve, per rank (a solve
// adds one exchange at its end; the last rank sends none).
#include <cstdint>
#include <vector>

#include "engine/layerpar/mgrit.hpp"

namespace strata {

struct MgritCycleCost {
  std::vector<int64_t> steps;   // per level, on one rank (the solver's MgritStats::steps)
  int64_t messages = 0;         // sent by one rank with both neighbours
  int64_t critical_steps = 0;   // step times on the critical path (parallel levels + the chain)
  int64_t critical_messages = 0;  // message latencies on it
};

inline MgritCycleCost mgrit_cycle_cost(int64_t n_steps, int ranks, const MgritOptions& o) {
  MgritCycleCost k;
  const int64_t c = o.cfactor, levels = o.levels;
  k.steps.assign(size_t(levels), 0);
  std::vector<int64_t> block(static_cast<size_t>(levels));
  for (int64_t l = 0, b = n_steps / ranks; l < levels; ++l, b /= c) block[size_t(l)] = b;
  if (levels == 1) {
    k.steps[0] = block[0];
    k.messages = 1;
    k.critical_steps = n_steps;
    k.critical_messages = ranks - 1;
    return k;
  }
  for (int64_t l = 0; l + 1 < levels; ++l) {
    const int64_t b = block[size_t(l)], f_sweep = b - b / c;
    const bool fcf = l > 0 || o.fcf;
    k.steps[size_t(l)] += fcf ? 2 * f_sweep + b / c : f_sweep;  // relaxation
    k.steps[size_t(l)] += block[size_t(l + 1)];                 // residual: Phi_l at each C-point
    k.steps[size_t(l + 1)] += block[size_t(l + 1)];             // FAS: Phi_{l+1} at each coarse point
    k.steps[size_t(l)] += f_sweep;                              // F-relaxation after the correction
    k.messages += fcf ? 3 : 2;                                  // one per F sweep
  }
  k.steps[size_t(levels - 1)] += block[size_t(levels - 1)];    // the sequential solve
  k.messages += 1;
  int64_t parallel = 0;
  for (int64_t l = 0; l + 1 < levels; ++l) parallel += k.steps[size_t(l)];
  parallel += k.steps[size_t(levels - 1)] - block[size_t(levels - 1)];
  k.critical_steps = parallel + ranks * block[size_t(levels - 1)];
  k.critical_messages = (k.messages - 1) + (ranks - 1);
  return k;
}

}  // namespace strata
