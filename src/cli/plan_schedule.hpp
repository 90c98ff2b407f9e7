#pragma once
// `strata plan DECK --schedule`: the pipeline schedule the deck asks for, as the instruction
// list every stage runs, with what a unit-cost simulation of it says (bubble against the
// formula, micro-batches in flight per stage), readiness-first dispatch against the list's
// order, and, given a run's stages.csv, the seconds per step both would take with the
// stage costs that run measured.
#include <ostream>
#include <string>

#include "core/deck.hpp"

namespace strata {

void print_schedule_plan(const Deck& deck, std::ostream& out, const std::string& stage_costs = "");

}  // namespace strata
