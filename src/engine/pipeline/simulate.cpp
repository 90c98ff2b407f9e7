#include "engine/pipeline/simulate.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace strata {
namespace {

bool is_send(PipeOp op) { return op == PipeOp::SendAct || op == PipeOp::SendGrad; }
bool is_recv(PipeOp op) { return op == PipeOp::RecvAct || op == PipeOp::RecvGrad; }
int message_kind(PipeOp op) { return op == PipeOp::SendAct || op == PipeOp::RecvAct ? 0 : 1; }

}  // namespace

double PipeSimulation::bubble_fraction() const {
  double total = 0;
  for (double b : busy) total += b;
  return makespan > 0 ? 1.0 - total / (double(busy.size()) * makespan) : 0.0;
}

PipeSimulation simulate_schedule(const PipeSchedule& s, const PipeCosts& costs) {
  const int p = s.stages;
  PipeSimulation sim;
  sim.busy.assign(p, 0.0);
  sim.times.resize(p);
  sim.peak_in_flight.assign(p, 0);
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<int> in_flight(p, 0);
  std::map<std::tuple<int, int, int, int>, double> sent;  // (from, to, kind, mb) -> time available
  for (int r = 0; r < p; ++r) sim.times[r].assign(s.programs[r].size(), {0.0, 0.0});
  bool moved = true;
  while (moved) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      const auto& prog = s.programs[r];
      while (pc[r] < prog.size()) {
        const PipeInstr& in = prog[pc[r]];
        double start = clock[r], cost = 0;
        if (is_recv(in.op)) {
          auto it = sent.find({in.peer, r, message_kind(in.op), in.mb});
          if (it == sent.end()) break;  // blocked until the peer sends
          start = std::max(start, it->second);
        } else if (in.op == PipeOp::Forward) {
          cost = costs.forward;
          sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], ++in_flight[r]);
        } else if (in.op == PipeOp::Backward) {
          cost = costs.backward;
          --in_flight[r];
        } else if (in.op == PipeOp::OptimizerStep) {
          cost = costs.optimizer;
        }
        if (is_send(in.op)) sent[{r, in.peer, message_kind(in.op), in.mb}] = start;
        if (in.op == PipeOp::Forward || in.op == PipeOp::Backward) sim.busy[r] += cost;
        sim.times[r][pc[r]] = {start, start + cost};
        clock[r] = start + cost;
        ++pc[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < p; ++r) {
    if (pc[r] < s.programs[r].size()) {
      sim.deadlock = true;
      sim.deadlock_report += "stage " + std::to_string(r) + " waits at " + to_string(s.programs[r][pc[r]]) + "; ";
    }
    sim.makespan = std::max(sim.makespan, clock[r]);
  }
  return sim;
}

std::string check_schedule(const PipeSchedule& s) {
  const int p = s.stages, total = s.micro_batches * s.mini_batches;
  // (from, to, kind) -> micro-batches in program order, for sends and for receives
  std::map<std::tuple<int, int, int>, std::vector<int>> sends, recvs;
  for (int r = 0; r < p; ++r) {
    std::vector<int> forwards(total, 0), backwards(total, 0);
    for (const auto& in : s.programs[r]) {
      if (in.op == PipeOp::Forward || in.op == PipeOp::Backward) {
        if (in.mb < 0 || in.mb >= total) return "stage " + std::to_string(r) + ": " + to_string(in) + " is out of range";
        if (in.op == PipeOp::Forward) ++forwards[in.mb];
        if (in.op == PipeOp::Backward) {
          if (forwards[in.mb] == 0) return "stage " + std::to_string(r) + ": B" + std::to_string(in.mb) + " before its forward";
          ++backwards[in.mb];
        }
      }
      if (is_send(in.op)) sends[{r, in.peer, message_kind(in.op)}].push_back(in.mb);
      if (is_recv(in.op)) recvs[{in.peer, r, message_kind(in.op)}].push_back(in.mb);
    }
    for (int mb = 0; mb < total; ++mb)
      if (forwards[mb] != 1 || backwards[mb] != 1)
        return "stage " + std::to_string(r) + ": micro-batch " + std::to_string(mb) + " runs " +
               std::to_string(forwards[mb]) + " forwards and " + std::to_string(backwards[mb]) + " backwards";
  }
  std::set<std::tuple<int, int, int>> keys;
  for (const auto& [k, v] : sends) keys.insert(k);
  for (const auto& [k, v] : recvs) keys.insert(k);
  for (const auto& k : keys)
    if (sends[k] != recvs[k])
      return std::string(std::get<2>(k) == 0 ? "activations" : "gradients") + " from stage " +
             std::to_string(std::get<0>(k)) + " to stage " + std::to_string(std::get<1>(k)) +
             ": sends and receives do not pair up in order";
  return "";
}

void assign_prediction_steps(PipeSchedule& s, const PipeCosts& costs) {
  const PipeSimulation sim = simulate_schedule(s, costs);
  if (sim.deadlock) return;  // nothing sensible to derive; check_schedule/simulate report it
  const int t = s.micro_batches;
  // target[n]: when stage 0 finishes the backward of mini-batch n's last micro-batch
  std::vector<double> target(s.mini_batches, 0.0);
  const auto& first = s.programs[0];
  for (size_t k = 0; k < first.size(); ++k)
    if (first[k].op == PipeOp::Backward && first[k].mb % t == t - 1) target[first[k].mb / t] = sim.times[0][k].second;
  for (int r = 0; r < s.stages; ++r) {
    auto& prog = s.programs[r];
    for (size_t k = 0; k < prog.size(); ++k) {
      if (prog[k].op != PipeOp::PredictWeights) continue;
      size_t pass = k + 1;  // the Forward or Backward it guards (a receive may come between)
      while (pass < prog.size() && prog[pass].op != PipeOp::Forward && prog[pass].op != PipeOp::Backward) ++pass;
      if (pass == prog.size()) continue;
      // this stage's updates after the pass (program order settles ties in time) and
      // before the target
      const double until = target[prog[pass].mb / t];
      int steps = 0;
      for (size_t j = pass + 1; j < prog.size(); ++j)
        if (prog[j].op == PipeOp::OptimizerStep && sim.times[r][j].first < until) ++steps;
      prog[k].steps = steps;
    }
  }
}

}  // namespace strata
