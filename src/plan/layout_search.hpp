#pragma once
// The planner's search: every layout of N ranks a deck admits, and the 3D splits it keeps,
// ranked by the step prediction (plan/step_prediction.hpp).
#include <vector>

#include "core/deck.hpp"
#include "plan/layout.hpp"

namespace strata {

class DryModels;
struct MachineFile;

// Every layout of exactly `ranks` ranks that the deck's model and batch admit (the
// deck's own checks, check_model_fits_grid): all factorisations data x pipeline x
// context x tensor, tensor serial, 1D (t >= 2), 2D (q >= 2) or, where the deck asks for
// tensor_mode = "3d", 3D (every X x Y x depth >= 2); context where 2 x context
// divides the sequence; with p stages, each schedule
// (gpipe, 1f1b, interleaved with v = 2 .. kMaxVirtualStages chunks per stage where the layers allow,
// zb-h1, zb-h2, xpipe) and each micro-batch count m that divides the replica's batch, up
// to kMaxMicroBatchesPerStage * p. Recomputation, ZeRO and sequence parallelism (on the
// 1D splits) as the deck asks (not the schedules that refuse them). With mixtures of
// experts, every expert split e dividing data (with a 1D split of t ranks, e t dividing the
// experts), and no 2D split (which the deck refuses with them). 3D splits: of each
// tensor size the two that ranked_3d_splits puts first with data = ranks / size, and the
// two it puts first with data = 1 (the most rows a micro-batch can have), every one where
// the deck asks for 3D on at most 8 ranks. For the GPT also its layer-parallel layouts (mgrit) of p >= 2 layer ranks,
// serial or with a 1D split without sequence parallelism: with the deck's layerpar.levels, and where that is 1 (a
// sequential chain through the ranks) also with 2 levels where the steps allow them.
constexpr int64_t kMaxMicroBatchesPerStage = 8;
constexpr int kMaxVirtualStages = 8;
std::vector<Layout> feasible_layouts(const Deck& deck, int ranks, const MachineFile* machine = nullptr);

// The X x Y x depth splits of `size` tensor ranks (size dividing ranks) that the deck
// admits, each with `data` data-parallel replicas (0: ranks / size) and no pipeline or
// context, fastest first: by the step prediction itself on `machine`
// (plan/step_prediction.hpp), or, without a machine, by the bytes a rank sends in AxoNN's
// closed form (plan/axonn_model.hpp); ties by the bytes.
// (models: a search's stage models, plan/dry_models.hpp; nullptr: its own)
std::vector<Layout> ranked_3d_splits(const Deck& deck, int ranks, int size, const MachineFile* machine, int data = 0,
                                     DryModels* models = nullptr);

}  // namespace strata
