#include "train/plan_schedule.hpp"

#include "core/log.hpp"
#include "engine/pipeline/simulate.hpp"

namespace strata {

void print_schedule_plan(const Deck& deck, std::ostream& out) {
  const auto& p = deck.parallel;
  const int stages = int(p.pipeline), m = int(p.micro_batches);
  // XPipe never flushes: show enough mini-batches to reach its steady state
  const int mini_batches = p.schedule == Schedule::XPipe ? 2 * stages + 1 : 1;
  const PipeSchedule s = make_schedule(p.schedule, stages, m, mini_batches);
  out << to_string(s);
  const PipeSimulation sim = simulate_schedule(s);
  if (sim.deadlock) {
    out << "simulation: DEADLOCK: " << sim.deadlock_report << "\n";
    return;
  }
  out << strfmt("simulation (unit cost per forward and per backward): makespan %.0f, bubble %.4f", sim.makespan,
                sim.bubble_fraction());
  if (p.schedule != Schedule::XPipe) out << strfmt(" (formula (p-1)/(m+p-1) = %.4f)", double(stages - 1) / double(m + stages - 1));
  out << "\nmicro-batches in flight per stage:";
  for (int v : sim.peak_in_flight) out << " " << v;
  out << "\n";
}

}  // namespace strata
