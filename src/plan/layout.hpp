#pragma once
// The planner's view of a layout (core/layout.hpp): its name with MGRIT's levels, the deck
// that runs it, and the overrides that select it.
#include <string>
#include <vector>

#include "core/deck.hpp"
#include "core/layout.hpp"

namespace strata {

// As strata train prints it, with MGRIT's levels beside the schedule: "data=2
// pipeline=2:1f1b:4mb tensor=1d:2", "data=1 pipeline=4:mgrit:L2".
std::string plan_name(const Layout& l);
// The deck run with layout l: its [parallel] keys (and layerpar.levels) l, every other key as deck has it.
Deck with_layout(const Deck& deck, const Layout& l);
// The --set overrides that select l (the dimensions the planner searches).
std::vector<std::string> layout_overrides(const Layout& l);
// What runs deck with layout l: l's overrides, then those that reset the deck's keys that
// have no effect under l (an MGRIT deck's [layerpar] keys under a pipeline, ...), so that
// strata train accepts the line the planner prints.
std::vector<std::string> run_overrides(const Deck& deck, const Layout& l);
// The layout the search starts from: the deck's, every searched dimension reset (one
// rank, no split, no pipeline, one micro-batch, one MGRIT level); the keys the search does not choose
// (ZeRO, recomputation, the 3D overlap, the backend, ...) as the deck has them.
Layout unsplit_layout(const Deck& deck);

}  // namespace strata
