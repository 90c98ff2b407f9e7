#pragma once
// `strata plan DECK --ranks N [--machine FILE]`: every layout of N ranks the deck admits,
// predicted (plan/step_prediction.hpp) on the machine, sorted by step time, with the one
// to run: the fastest that fits in the machine's memory per rank.
#include <ostream>
#include <vector>

#include "plan/machine_file.hpp"
#include "plan/step_prediction.hpp"

namespace strata {

// All feasible layouts' predictions, fastest first.
std::vector<StepPrediction> rank_layouts(const Deck& deck, int ranks, const MachineFile& machine);

// Prints the table (the `top` fastest; 0: all) and the recommendation. Returns the
// recommended layout's index in the ranking, or -1 when none fits in memory.
int print_layout_plan(const Deck& deck, int ranks, const MachineFile& machine, std::ostream& out, int top);

// `strata plan DECK --cores C`: C cores (whole nodes of the machine's, or part of one) as
// ranks x threads, for every thread count t that divides a node's cores and C: the best
// layout of C / t ranks on the machine as ranks of t threads see it (MachineFile::at_threads),
// and the fastest that fits recommended. Returns its thread count, or -1 when none fits.
int print_thread_plan(const Deck& deck, int cores, const MachineFile& machine, std::ostream& out);

}  // namespace strata
