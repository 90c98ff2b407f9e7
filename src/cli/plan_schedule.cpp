#include "cli/plan_schedule.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "engine/pipeline/pass_delays.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/pipeline/simulate_ready.hpp"
#include "plan/measured_stage_costs.hpp"

namespace strata {
namespace {

// The makespans, per step of draws [first, first + steps), of the list's order and of
// readiness-first dispatch (at the list's peak in flight, at `cap` and at `room` when
// > 0) under `var` (no slowdowns when it is inactive).
struct DispatchMakespans {
  std::vector<double> order, at_peak, at_cap, with_room;
};
DispatchMakespans simulate_dispatch(const PipeSchedule& s, PipeCosts costs, const VariabilityConfig& var, int cap,
                                    int room, int64_t first, int64_t steps) {
  DispatchMakespans t;
  for (int64_t step = first; step < first + steps; ++step) {
    if (var.active())
      costs.slowdown = [&](int r, const PipeInstr& in) { return slowdown_share(var, step, r, in.op, in.mb, in.chunk); };
    t.order.push_back(simulate_schedule(s, costs).makespan);
    t.at_peak.push_back(simulate_ready(s, costs).makespan);
    t.at_cap.push_back(cap > 0 ? simulate_ready(s, costs, cap).makespan : 0.0);
    t.with_room.push_back(room > 0 ? simulate_ready(s, costs, room).makespan : 0.0);
  }
  return t;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / double(v.size());
}

std::string variability_words(const VariabilityConfig& var) {
  if (!var.active()) return "no variability";
  const std::string draw =
      var.draw == SlowdownDraw::Uniform
          ? strfmt("uniform slowdowns of %.0f-%.0f%%", 100 * var.slowdown_min, 100 * var.slowdown_max)
          : strfmt("slowdowns of %.0f%% with chance %.2f", 100 * var.slowdown_max, var.spike_chance);
  return draw + " of each pass on " +
         (var.stage < 0 ? std::string("every stage") : strfmt("stage %lld", (long long)var.stage));
}

// Readiness-first dispatch against the list's order, both simulated with the deck's
// [variability] draws (or, without them, 0-60% on every stage): the makespans' ratio at
// the schedule's peak in flight, at the deck's dispatch_in_flight, and with room for 2p,
// and whether it pays.
void print_dispatch_plan(const Deck& deck, const PipeSchedule& s, const PipeCosts& costs, std::ostream& out) {
  VariabilityConfig var = deck.variability;
  if (!var.active()) var.slowdown_max = 0.6;
  const int room = 2 * s.stages, cap = int(deck.parallel.dispatch_in_flight);
  const DispatchMakespans t = simulate_dispatch(s, costs, var, cap, room, 0, 20);
  const double order = mean(t.order), at_peak = mean(t.at_peak), with_room = mean(t.with_room);
  const double at_cap = cap > 0 ? mean(t.at_cap) : 0.0;
  out << strfmt("dispatch under %s (20 steps' draws): \"ready\" is %.3fx \"order\"", variability_words(var).c_str(),
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

// The seconds per step the simulator predicts from a run's measured stage costs, for both
// dispatch modes: the median over the steps the file's costs come from, each under the
// deck's own [variability] draws of that step (none when it has none).
void print_measured_plan(const Deck& deck, const PipeSchedule& s, const std::string& stages_csv, std::ostream& out) {
  const MeasuredStages m = read_stage_costs(stages_csv, s.stages);
  out << strfmt("measured stage costs (%s, steps %lld-%lld), per micro-batch:", stages_csv.c_str(),
                (long long)m.first_step, (long long)m.last_step);
  for (int r = 0; r < s.stages; ++r)
    out << strfmt(" stage %d forward %.4g s, backward %.4g s;", r, m.costs.forward_of(r), m.costs.backward_of(r));
  out << strfmt(" outside the pipeline %.4g s per step\n", m.outside);
  const int cap = int(deck.parallel.dispatch_in_flight);
  // metrics.csv's step n draws the slowdowns of step n - 1
  const DispatchMakespans t =
      simulate_dispatch(s, m.costs, deck.variability, cap, 0, m.first_step - 1, m.last_step - m.first_step + 1);
  out << strfmt("simulated step under %s, median of steps %lld-%lld: \"order\" %.4g s, \"ready\" %.4g s",
                variability_words(deck.variability).c_str(), (long long)m.first_step, (long long)m.last_step,
                median(t.order) + m.outside, median(t.at_peak) + m.outside);
  if (cap > 0) out << strfmt(", \"ready\" with dispatch_in_flight = %d %.4g s", cap, median(t.at_cap) + m.outside);
  out << strfmt(" (the measured run: %.4g s per step)\n", m.step);
}

}  // namespace

void print_schedule_plan(const Deck& deck, std::ostream& out, const std::string& stage_costs) {
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
  if (!stage_costs.empty() && p.schedule == Schedule::XPipe)
    throw UserError(
        "strata plan --stage-costs: simulates a step of the flushing schedules; xpipe's list never flushes");
  if (!stage_costs.empty()) print_measured_plan(deck, s, stage_costs, out);
}

}  // namespace strata
