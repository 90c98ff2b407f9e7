#include "cli/plan_schedule.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/pipeline/simulate.hpp"

namespace strata {

void print_schedule_plan(const Deck& deck, std::ostream& out) {
  const auto& p = deck.parallel;
  if (p.mgrit()) throw UserError("parallel.schedule = \"mgrit\" is a layer-parallel solver, not an instruction list");
  const int stages = int(p.pipeline), m = int(p.micro_batches);
  // XPipe never flushes: show enough mini-batches to reach its steady state
  const int mini_batches = p.schedule == Schedule::XPipe ? 2 * stages + 1 : 1;
  const PipeSchedule s = make_schedule(p.schedule, stages, m, mini_batches, int(p.virtual_stages));
  out << to_string(s);
  PipeCosts costs;  // F = 1, a backward 2: its input and weight halves 1 each
  costs.backward = 2;
  const PipeSimulation sim = simulate_schedule(s, costs);
  if (sim.deadlock) {
    out << "simulation: DEADLOCK: " << sim.deadlock_report << "\n";
    return;
  }
  out << strfmt("simulation (unit cost per forward, 2 per backward, 1 per half): makespan %.0f, bubble %.4f",
                sim.makespan, sim.bubble_fraction());
  const double p1 = stages - 1;
  if (p.schedule == Schedule::GPipe || p.schedule == Schedule::OneFOneB)
    out << strfmt(" (formula (p-1)/(m+p-1) = %.4f)", p1 / (m + p1));
  if (p.schedule == Schedule::Interleaved && m > stages)
    out << strfmt(" (formula (p-1)/(v m+p-1) = %.4f)", p1 / (double(p.virtual_stages) * m + p1));
  const bool zb_formula =
      (p.schedule == Schedule::ZBH1 && m >= stages) || (p.schedule == Schedule::ZBH2 && m >= 2 * stages - 1);
  if (zb_formula) out << strfmt(" (formula (p-1)(F+I-W)/(m(F+I+W)+(p-1)(F+I-W)) = %.4f)", p1 / (3.0 * m + p1));
  out << "\nmicro-batches in flight per stage:";
  for (int v : sim.peak_in_flight) out << " " << v;
  out << "\n";
}

}  // namespace strata
