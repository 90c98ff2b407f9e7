#include "engine/pipeline/simulate.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace strata {
namespace {

const char* message_kind_name(int kind) {
  static const char* names[] = {"activations", "gradients", "tied-embedding gradients", "tied-embedding weights"};
  return names[kind];
}

}  // namespace

double PipeCosts::transfer_of(PipeOp send) const {
  switch (send) {
    case PipeOp::SendTiedGrad:
      return tied_grad_transfer;
    case PipeOp::SendTiedWeights:
      return tied_weights_transfer;
    default:
      return transfer;
  }
}

double pass_cost(const PipeSchedule& s, const PipeCosts& costs, int r, const PipeInstr& in) {
  const double v = s.virtual_stages;  // a chunk's pass costs 1/v of the stage's
  double cost = 0;
  switch (in.op) {
    case PipeOp::Forward:
      cost = costs.forward_of(r) / v;
      break;
    case PipeOp::Backward:
      cost = costs.backward_of(r) / v;
      break;
    case PipeOp::BackwardInput:
      cost = costs.input_half_of(r) / v;
      break;
    case PipeOp::BackwardWeight:
      cost = costs.weight_half_of(r) / v;
      break;
    case PipeOp::OptimizerStep:
      return costs.optimizer;
    default:
      return 0;
  }
  return costs.slowdown ? cost * (1 + costs.slowdown(r, in)) : cost;
}

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
  std::vector<std::pair<int, int>> in_place(static_cast<size_t>(p), {0, 0});  // XPipe's predicted look-ahead
  // (from, to, kind, mb, the receiver's chunk) -> time available
  std::map<std::tuple<int, int, int, int, int>, double> sent;
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
          auto it = sent.find({in.peer, r, message_kind(in.op), in.mb, in.chunk});
          if (it == sent.end()) break;  // blocked until the peer sends
          start = std::max(start, it->second);
        } else {
          cost = pass_cost(s, costs, r, in);
          if (in.op == PipeOp::Forward) sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], ++in_flight[r]);
          if (in.op == PipeOp::Backward || in.op == PipeOp::BackwardWeight) --in_flight[r];
        }
        if (!costs.stage_predict.empty()) {  // the prediction in place, as the engine keeps it
          const std::pair<int, int> ahead{in.steps, in.tied_steps};
          if (in.op == PipeOp::PredictWeights) {
            if (ahead != std::pair<int, int>{0, 0} && ahead != in_place[r]) cost = costs.stage_predict[size_t(r)];
            in_place[r] = ahead;
          } else if (in.op == PipeOp::OptimizerStep || in.op == PipeOp::SendTiedWeights ||
                     in.op == PipeOp::RecvTiedWeights) {
            in_place[r] = {0, 0};
          }
        }
        if (is_send(in.op))
          sent[{r, in.peer, message_kind(in.op), in.mb, message_destination(s, r, in).second}] =
              start + costs.transfer_of(in.op);
        if (in.op == PipeOp::Forward || in.op == PipeOp::Backward || in.op == PipeOp::BackwardInput ||
            in.op == PipeOp::BackwardWeight)
          sim.busy[r] += cost;
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
  const int p = s.stages, v = s.virtual_stages, total = s.micro_batches * s.mini_batches;
  // (from, to, kind, the receiver's chunk) -> micro-batches in program order, for sends and for receives
  std::map<std::tuple<int, int, int, int>, std::vector<int>> sends, recvs;
  for (int r = 0; r < p; ++r) {
    // per (chunk, micro-batch)
    std::vector<int> forwards(size_t(v) * total, 0), backwards(forwards), inputs(forwards), weights(forwards);
    const std::string stage = "stage " + std::to_string(r) + ": ";
    for (const auto& in : s.programs[r]) {
      const bool pass = in.op == PipeOp::Forward || in.op == PipeOp::Backward || in.op == PipeOp::BackwardInput ||
                        in.op == PipeOp::BackwardWeight;
      if (pass) {
        if (in.mb < 0 || in.mb >= total || in.chunk < 0 || in.chunk >= v)
          return stage + to_string(in) + " is out of range";
        const size_t k = size_t(in.chunk) * total + in.mb;
        if (in.op == PipeOp::Forward) ++forwards[k];
        if (in.op != PipeOp::Forward && forwards[k] == 0) return stage + to_string(in) + " before its forward";
        if (in.op == PipeOp::BackwardWeight && inputs[k] == 0) return stage + to_string(in) + " before its input half";
        if (in.op == PipeOp::Backward) ++backwards[k];
        if (in.op == PipeOp::BackwardInput) ++inputs[k];
        if (in.op == PipeOp::BackwardWeight) ++weights[k];
      }
      if (is_send(in.op))
        sends[{r, in.peer, message_kind(in.op), message_destination(s, r, in).second}].push_back(in.mb);
      if (is_recv(in.op)) recvs[{in.peer, r, message_kind(in.op), in.chunk}].push_back(in.mb);
    }
    for (size_t k = 0; k < forwards.size(); ++k) {
      const bool whole = backwards[k] == 1 && inputs[k] == 0 && weights[k] == 0;
      const bool halves = backwards[k] == 0 && inputs[k] == 1 && weights[k] == 1;
      if (forwards[k] != 1 || !(whole || halves))
        return stage + "micro-batch " + std::to_string(k % total) +
               (v > 1 ? " on chunk " + std::to_string(k / total) : "") + " runs " + std::to_string(forwards[k]) +
               " forwards, " + std::to_string(backwards[k]) + " backwards and " + std::to_string(inputs[k]) + " + " +
               std::to_string(weights[k]) + " halves";
    }
  }
  std::set<std::tuple<int, int, int, int>> keys;
  for (const auto& [k, list] : sends) keys.insert(k);
  for (const auto& [k, list] : recvs) keys.insert(k);
  for (const auto& k : keys)
    if (sends[k] != recvs[k])
      return std::string(message_kind_name(std::get<2>(k))) + " from stage " + std::to_string(std::get<0>(k)) +
             " to stage " + std::to_string(std::get<1>(k)) +
             (v > 1 ? " (its chunk " + std::to_string(std::get<3>(k)) + ")" : "") +
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
  // Each stage's updates, in program order: their positions and start times. A stage runs
  // its program in order, so start times never decrease along it, and "the updates after
  // position k that start before t" is a range of this list, found by binary search (the
  // planner derives these for every XPipe layout it weighs; counting them by a scan per
  // prediction was a quarter of a 64-rank plan's time).
  std::vector<std::vector<size_t>> update_at(size_t(s.stages));
  std::vector<std::vector<double>> update_start(size_t(s.stages));
  for (int r = 0; r < s.stages; ++r)
    for (size_t k = 0; k < s.programs[r].size(); ++k)
      if (s.programs[r][k].op == PipeOp::OptimizerStep) {
        update_at[size_t(r)].push_back(k);
        update_start[size_t(r)].push_back(sim.times[r][k].first);
      }
  const auto updates_starting_before = [&](int r, double until) {  // a prefix of the stage's updates
    const auto& st = update_start[size_t(r)];
    return size_t(std::lower_bound(st.begin(), st.end(), until) - st.begin());
  };
  // the first stage's updates before each target: the tied embedding's version there
  std::vector<int> first_stage_updates(s.mini_batches, 0);
  for (int n = 0; n < s.mini_batches; ++n) first_stage_updates[n] = int(updates_starting_before(0, target[n]));
  const auto& last = s.programs[s.stages - 1];
  const bool exchanges_tied =
      std::any_of(last.begin(), last.end(), [](const PipeInstr& i) { return i.op == PipeOp::RecvTiedWeights; });
  for (int r = 0; r < s.stages; ++r) {
    auto& prog = s.programs[r];
    int tied_versions = 0;  // embedding versions the stage took from the first stage so far
    for (size_t k = 0; k < prog.size(); ++k) {
      tied_versions += prog[k].op == PipeOp::RecvTiedWeights;
      if (prog[k].op != PipeOp::PredictWeights) continue;
      size_t pass = k + 1;  // the Forward or Backward it guards (a receive may come between)
      while (pass < prog.size() && prog[pass].op != PipeOp::Forward && prog[pass].op != PipeOp::Backward) ++pass;
      if (pass == prog.size()) continue;
      // this stage's updates after the pass (program order settles ties in time) and
      // before the target
      const double until = target[prog[pass].mb / t];
      const auto& at = update_at[size_t(r)];
      const size_t after = size_t(std::upper_bound(at.begin(), at.end(), pass) - at.begin());
      const size_t before = updates_starting_before(r, until);
      prog[k].steps = before > after ? int(before - after) : 0;
      // a stage with a copy of the tied embedding looks ahead from the version it holds
      if (r > 0 && r == s.stages - 1 && exchanges_tied)
        prog[k].tied_steps = first_stage_updates[prog[pass].mb / t] - tied_versions;
    }
  }
}

}  // namespace strata
