#pragma once
// `strata plan DECK --schedule`: the pipeline schedule the deck asks for, as the instruction
// list every stage runs, with what a unit-cost simulation of it says (bubble against the
// formula, micro-batches in flight per stage).
#include <ostream>

#include "core/deck.hpp"

namespace strata {

void print_schedule_plan(const Deck& deck, std::ostream& out);

}  // namespace strata
