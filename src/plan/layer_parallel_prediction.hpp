#pragma once
// Layer-parallel layouts (parallel.schedule = "mgrit"): their step, memory and MGRIT solves
// as the planner predicts them (step_prediction.hpp hands l.mgrit() layouts here).
#include "core/deck.hpp"
#include "engine/layer_parallel/mgrit_cost.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"
#include "plan/prediction.hpp"

namespace strata {

class DryModels;

StepPrediction predict_layer_parallel(const Deck& deck, const Layout& l, const MachineFile& machine,
                                      DryModels* models);
MemoryPrediction layer_parallel_memory(const Deck& deck, const Layout& l, DryModels* models);

// The MGRIT solves the planner replays for a layer-parallel layout (l.mgrit(): the deck's
// [layerpar] options with l.mgrit_levels, every V-cycle run, the steps balanced over the layer
// ranks): each layer rank's step evaluations per level and states sent, as the solvers
// count them (MgritStats), in the forward solve and in the adjoint's.
struct LayerParallelSolves {
  MgritCost forward, adjoint;  // both indexed by layer rank
};
LayerParallelSolves planned_solves(const Deck& deck, const Layout& layout);

}  // namespace strata
