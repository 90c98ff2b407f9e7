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

}  // namespace strata
