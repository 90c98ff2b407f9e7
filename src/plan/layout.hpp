#pragma once
// A parallel layout the planner considers for a deck on N ranks: data x pipeline x
// context x tensor (1D over t ranks, 2D over q x q or 3D over X x Y x depth), with a pipeline schedule and
// micro-batch count where there are stages. It maps onto the deck's [parallel] keys, so a layout the
// planner recommends is run by setting those keys.
#include <string>
#include <vector>

#include "core/deck.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

class DryModels;

struct MachineFile;

struct Layout {
  int data = 1, pipeline = 1;
  int context = 1;  // ranks each sequence is split over
  ContextMode context_mode = ContextMode::Ring;
  TensorMode tensor = TensorMode::Serial;
  int t = 1;                               // 1D group size
  bool sequence = false;                   // 1D: sequence parallelism
  int q = 1;                               // 2D grid side
  int tx = 1, ty = 1, tz = 1;              // 3D: X, Y and depth
  Schedule schedule = Schedule::OneFOneB;  // with pipeline > 1
  int virtual_stages = 1;                  // interleaved: chunks per stage
  int micro_batches = 1;                   // with pipeline = 1: gradient accumulation
  Recompute recompute = Recompute::None;
  int zero = 0;    // ZeRO stage (0 to 3)
  int expert = 1;  // mixtures of experts: data ranks the experts are split over
  // layer-parallel training (parallel.schedule = "mgrit"): the pipeline's ranks are layer
  // ranks, whose blocks MGRIT solves with this many levels (the rest of [layerpar] as the deck says)
  bool mgrit = false;
  int levels = 1;
  int tensor_size() const {
    return tensor == TensorMode::OneD     ? t
           : tensor == TensorMode::TwoD   ? q * q
           : tensor == TensorMode::ThreeD ? tx * ty * tz
                                          : 1;
  }
  int ranks() const { return data * pipeline * context * tensor_size(); }
  int replicas() const { return data * context; }  // the ranks holding the same parameters
  // as the trainer prints it: "data=2 pipeline=2:1f1b:4mb tensor=1d:2" (MGRIT: "pipeline=4:mgrit:L2")
  std::string name() const;
  // the deck's [parallel] keys for this layout (the rest of the deck unchanged)
  Deck applied_to(const Deck& deck) const;
  // --set overrides that select it
  std::vector<std::string> overrides() const;
};

// The layout a deck runs: every dimension its [parallel] keys (and layerpar.levels) set,
// the inverse of Layout::applied_to (layout_of(l.applied_to(d)) is l; tests/plan/test_memory_fit.cpp
// walks every feasible layout of decks with each split). What the memory check before a
// run weighs (plan/memory_fit.hpp).
Layout layout_of(const Deck& deck);

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
