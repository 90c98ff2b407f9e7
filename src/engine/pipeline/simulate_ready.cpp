#include "engine/pipeline/simulate_ready.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "engine/pipeline/ready_dispatch.hpp"

namespace strata {

namespace {
// One stage under ready dispatch in simulate_ready: its tasks and clock; while it has
// nothing to run, since when (idle_since) and whether it waits for a message not sent yet.
struct ReadyStage {
  ReadyStage(const StageProgram& program, int cap) : tasks(program, cap) {}
  ReadyDispatch tasks;
  double clock = 0, idle_since = -1;  // -1: busy
  bool blocked = false;
  int in_flight = 0;
  void idle(double next_arrival) {  // nothing to run now: until next_arrival (< 0: a send not made yet)
    idle_since = clock;
    blocked = next_arrival < 0;
    if (!blocked) clock = next_arrival;
  }
  void arrives(double at) {  // a message for it: an idle stage wakes at its arrival
    if (idle_since < 0) return;
    clock = blocked ? std::max(at, idle_since) : std::min(clock, std::max(at, idle_since));
    blocked = false;
  }
};

// After the last task: a stage still unfinished is deadlocked; the others' updates.
void close_simulation(const PipeSchedule& s, const PipeCosts& costs, std::vector<ReadyStage>& stages, PipeSimulation& sim) {
  const int p = s.stages;
  for (int r = 0; r < p; ++r) {
    ReadyStage& st = stages[size_t(r)];
    const auto& prog = s.programs[size_t(r)];
    if (!st.tasks.finished()) {
      sim.deadlock = true;
      sim.deadlock_report += "stage " + std::to_string(r) + " waits at " +
                             to_string(prog[st.tasks.tasks()[size_t(st.tasks.hint())].first]) + "; ";
      continue;
    }
    if (!prog.empty() && prog.back().op == PipeOp::OptimizerStep) {
      sim.times[size_t(r)].back() = {st.clock, st.clock + costs.optimizer};
      st.clock += costs.optimizer;
    }
    sim.makespan = std::max(sim.makespan, st.clock);
  }
}

}  // namespace

PipeSimulation simulate_ready(const PipeSchedule& s, const PipeCosts& costs, int in_flight_cap) {
  const int p = s.stages;
  PipeSimulation sim;
  sim.busy.assign(size_t(p), 0.0);
  sim.times.resize(size_t(p));
  sim.peak_in_flight.assign(size_t(p), 0);
  std::vector<ReadyStage> stages;
  for (int r = 0; r < p; ++r) {
    stages.emplace_back(s.programs[size_t(r)], in_flight_cap);
    sim.times[size_t(r)].assign(s.programs[size_t(r)].size(), {0.0, 0.0});
  }
  std::map<std::tuple<int, int, int, int, int>, double> sent;  // as simulate_schedule's
  const auto arrival = [&](int r, const StageTask& t) {  // of its message (< 0: not sent yet)
    if (!t.receives) return 0.0;
    const PipeInstr& in = s.programs[size_t(r)][t.first];
    const auto it = sent.find({in.peer, r, message_kind(in.op), in.mb, in.chunk});
    return it == sent.end() ? -1.0 : it->second;
  };
  for (;;) {
    int r = -1;  // the unfinished, unblocked stage that is earliest free
    for (int q = 0; q < p; ++q)
      if (!stages[size_t(q)].tasks.finished() && !stages[size_t(q)].blocked &&
          (r < 0 || stages[size_t(q)].clock < stages[size_t(r)].clock))
        r = q;
    if (r < 0) break;
    ReadyStage& st = stages[size_t(r)];
    const int task = st.tasks.pick([&](const StageTask& t) {
      const double at = arrival(r, t);
      return at >= 0 && at <= st.clock;
    });
    if (task < 0) {  // idle until the first known arrival, or blocked until a send
      double next = -1;
      for (int k : st.tasks.allowed()) {
        const double at = arrival(r, st.tasks.tasks()[size_t(k)]);
        if (at >= 0 && (next < 0 || at < next)) next = at;
      }
      st.idle(next);
      continue;
    }
    st.idle_since = -1;
    const StageTask& t = st.tasks.tasks()[size_t(task)];
    const auto& prog = s.programs[size_t(r)];
    const PipeInstr& pass = prog[t.pass()];
    const double start = st.clock, cost = pass_cost(s, costs, r, pass), end = start + cost;
    for (size_t i = t.first; i < t.end; ++i) {
      const PipeInstr& in = prog[i];
      sim.times[size_t(r)][i] = i < t.pass() ? std::make_pair(start, start) : i == t.pass() ? std::make_pair(start, end)
                                                                                            : std::make_pair(end, end);
      if (!is_send(in.op)) continue;
      const double at = end + costs.transfer_of(in.op);
      sent[{r, in.peer, message_kind(in.op), in.mb, message_destination(s, r, in).second}] = at;
      stages[size_t(in.peer)].arrives(at);
    }
    if (pass.op == PipeOp::Forward) sim.peak_in_flight[size_t(r)] = std::max(sim.peak_in_flight[size_t(r)], ++st.in_flight);
    if (pass.op == PipeOp::Backward || pass.op == PipeOp::BackwardWeight) --st.in_flight;
    sim.busy[size_t(r)] += cost;
    st.clock = end;
    st.tasks.done(task);
  }
  close_simulation(s, costs, stages, sim);
  return sim;
}

}  // namespace strata
