#include "cli/plan_schedule.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "engine/pipeline/pass_delays.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/pipeline/simulate_ready.hpp"

namespace strata {
namespace {

// Readiness-first dispatch against the list's order, both simulated with the deck's
// [variability] draws (or, without them, 0-60% on every stage) over 20 steps' draws: the
// makespans' ratio at the schedule's peak in flight, at the deck's dispatch_in_flight, and
// with room for 2p, and whether it pays.
void print_dispatch_plan(const Deck& deck, const PipeSchedule& s, PipeCosts costs, std::ostream& out) {
  VariabilityConfig var = deck.variability;
  if (!var.active()) var.slowdown_max = 0.6;
  const int room = 2 * s.stages, cap = int(deck.parallel.dispatch_in_flight);
  double order = 0, at_peak = 0, at_cap = 0, with_room = 0;
  for (int64_t step = 0; step < 20; ++step) {
    costs.slowdown = [&](int r, const PipeInstr& in) { return slowdown_share(var, step, r, in.op, in.mb, in.chunk); };
    order += simulate_schedule(s, costs).makespan;
    at_peak += simulate_ready(s, costs).makespan;
    at_cap += cap > 0 ? simulate_ready(s, costs, cap).makespan : 0.0;
    with_room += simulate_ready(s, costs, room).makespan;
  }
  const std::string draw =
      var.draw == SlowdownDraw::Uniform
          ? strfmt("uniform slowdowns of %.0f-%.0f%%", 100 * var.slowdown_min, 100 * var.slowdown_max)
          : strfmt("slowdowns of %.0f%% with chance %.2f", 100 * var.slowdown_max, var.spike_chance);
  out << strfmt("dispatch under %s of each pass on %s (20 steps' draws): \"ready\" is %.3fx \"order\"",
                draw.c_str(), var.stage < 0 ? "every stage" : strfmt("stage %lld", (long long)var.stage).c_str(),
                order / at_peak);
  if (cap > 0) out << strfmt(", %.3fx with dispatch_in_flight = %d", order / at_cap, cap);
  out << strfmt(", %.3fx with room for %d in flight (dispatch_in_flight = %d)\n", order / with_room, room, room);
  const double best = std::max({order / at_peak, order / with_room, cap > 0 ? order / at_cap : 0.0});
  out << (best >= 1.02 ? strfmt("dispatch: \"ready\" pays here (up to %.2fx)%s\n", best,
                                best > order / at_peak + 0.01 ? ", with micro-batches in flight beyond the schedule's "
                                                                "peak (one activation cache each)"
                                                              : "")
                       : strfmt("dispatch: \"ready\" does not pay here (at best %.3fx \"order\")\n", best));
}

}  // namespace

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
  if (p.schedule != Schedule::XPipe && stages > 1) print_dispatch_plan(deck, s, costs, out);
}

}  // namespace strata
