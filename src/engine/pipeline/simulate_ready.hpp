#pragma once
// A flushing schedule's list run on paper under parallel.dispatch = "ready"
// (ready_dispatch.hpp): each stage, when free, runs the first task the rules allow whose
// message has arrived by then (in_flight_cap: parallel.dispatch_in_flight); of the stages
// with something to do, the one that is earliest free goes first. The same costs and
// results as simulate_schedule (simulate.hpp), which runs the lists in order. No XPipe lists.
#include "engine/pipeline/simulate.hpp"

namespace strata {

PipeSimulation simulate_ready(const PipeSchedule& s, const PipeCosts& costs = {}, int in_flight_cap = 0);

}  // namespace strata
