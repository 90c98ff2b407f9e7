#pragma once
// A stage chunk's parameters as its passes read them and its backward finishes them, which
// the model names piece by piece (a layer, or the embedding, or the head) in forward
// order; ZeRO-3's gather steps of either pass (StageUnits::param_steps) and ZeRO-2/3's
// gradient order (StageUnits::grad_ready_order) follow from that list alone.
#include <vector>

#include "state/stage_units.hpp"

namespace strata {

struct PassPiece {
  ParamSteps steps;               // the forward's steps through its parameters, in order
  bool backward_reads = true;     // the backward reads them: the same steps, last first
  bool backward_repeats = false;  // ... after the forward's steps again (a recomputed layer)
  std::vector<FlatRange> ready;   // its gradients' ranges, in the order its backward finishes them
};
using PassPieces = std::vector<PassPiece>;

inline ParamSteps forward_steps(const PassPieces& pieces) {
  ParamSteps out;
  for (const auto& p : pieces) out.insert(out.end(), p.steps.begin(), p.steps.end());
  return out;
}

inline ParamSteps backward_steps(const PassPieces& pieces) {
  ParamSteps out;
  for (auto p = pieces.rbegin(); p != pieces.rend(); ++p) {
    if (!p->backward_reads) continue;
    if (p->backward_repeats) out.insert(out.end(), p->steps.begin(), p->steps.end());
    out.insert(out.end(), p->steps.rbegin(), p->steps.rend());
  }
  return out;
}

// The pieces' gradient ranges as the backward finishes them (the pieces last first),
// appended to order.
inline void append_ready_order(const PassPieces& pieces, std::vector<FlatRange>& order) {
  for (auto p = pieces.rbegin(); p != pieces.rend(); ++p) order.insert(order.end(), p->ready.begin(), p->ready.end());
}

}  // namespace strata
