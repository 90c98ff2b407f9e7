#include "engine/pipeline/schedule.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "engine/pipeline/simulate.hpp"

namespace strata {
namespace {

PipeSchedule empty_schedule(Schedule kind, int stages, int micro_batches, int mini_batches) {
  if (stages < 1 || micro_batches < 1 || mini_batches < 1)
    throw UserError("pipeline schedule " + to_string(kind) + ": stages, micro-batches and mini-batches must be >= 1");
  PipeSchedule s;
  s.kind = kind;
  s.stages = stages;
  s.micro_batches = micro_batches;
  s.mini_batches = mini_batches;
  s.programs.resize(stages);
  return s;
}

// 1F1B order over micro-batches 0..n-1 for stage r of p; `pass(op, mb)` emits one pass
// and `after_backward(mb)` anything that follows a backward.
template <class Pass, class AfterBackward>
void one_f_one_b_order(int p, int r, int n, Pass pass, AfterBackward after_backward) {
  const int warmup = std::min(p - r - 1, n);
  for (int i = 0; i < warmup; ++i) pass(PipeOp::Forward, i);
  for (int i = 0; i < n - warmup; ++i) {
    pass(PipeOp::Forward, warmup + i);
    pass(PipeOp::Backward, i);
    after_backward(i);
  }
  for (int i = n - warmup; i < n; ++i) {
    pass(PipeOp::Backward, i);
    after_backward(i);
  }
}

}  // namespace

PipeSchedule gpipe_schedule(int p, int m) {
  PipeSchedule s = empty_schedule(Schedule::GPipe, p, m, 1);
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    for (int i = 0; i < m; ++i) prog.push_back({PipeOp::Forward, i});
    for (int i = 0; i < m; ++i) prog.push_back({PipeOp::Backward, i});
    prog.push_back({PipeOp::OptimizerStep, 0});
  }
  return s;
}

PipeSchedule one_f_one_b_schedule(int p, int m) {
  PipeSchedule s = empty_schedule(Schedule::OneFOneB, p, m, 1);
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    one_f_one_b_order(
        p, r, m,
        [&](PipeOp op, int mb) {
          prog.push_back({op, mb});
        },
        [](int) {});
    prog.push_back({PipeOp::OptimizerStep, 0});
  }
  return s;
}

namespace {
// The zero-bubble lists (schedule.hpp): warmup(r) forwards, then per micro-batch its
// BackwardInput, the oldest BackwardWeights while more than deferred(r) wait, the next
// forward; the remaining BackwardWeights last.
template <class Warmup, class Deferred>
PipeSchedule zero_bubble_schedule(Schedule kind, int p, int m, Warmup warmup, Deferred deferred) {
  PipeSchedule s = empty_schedule(kind, p, m, 1);
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    int f = 0, i = 0, w = 0;
    for (; f < std::min(warmup(r), m); ++f) prog.push_back({PipeOp::Forward, f});
    while (i < m) {
      prog.push_back({PipeOp::BackwardInput, i++});
      for (; i - w > deferred(r); ++w) prog.push_back({PipeOp::BackwardWeight, w});
      if (f < m) prog.push_back({PipeOp::Forward, f++});
    }
    for (; w < m; ++w) prog.push_back({PipeOp::BackwardWeight, w});
    prog.push_back({PipeOp::OptimizerStep, 0});
  }
  return s;
}
}  // namespace

PipeSchedule interleaved_schedule(int p, int m, int v) {
  PipeSchedule s = empty_schedule(Schedule::Interleaved, p, m, 1);
  if (v < 1 || (v > 1 && (p < 2 || m % p != 0)))
    throw UserError("interleaved 1F1B: " + std::to_string(v) +
                    " chunks per stage need at least 2 stages and a "
                    "multiple of the stages (" +
                    std::to_string(p) + ") in micro-batches (got " + std::to_string(m) + ")");
  if (v == 1) return one_f_one_b_schedule(p, m);  // (kind 1F1B)
  s.virtual_stages = v;
  const int total = m * v, group = p * v;
  // the k-th forward (backward) of a stage: its micro-batch and chunk
  const auto pass = [&](PipeOp op, int k) {
    const int in_group = k % group, chunk = in_group / p;
    return PipeInstr{op, k / group * p + k % p, -1, 0, 0, op == PipeOp::Forward ? chunk : v - 1 - chunk};
  };
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    const int warmup = m == p ? total : std::min(total, (p - r - 1) * 2 + (v - 1) * p);
    for (int k = 0; k < warmup; ++k) prog.push_back(pass(PipeOp::Forward, k));
    for (int k = 0; k < total - warmup; ++k) {
      prog.push_back(pass(PipeOp::Forward, warmup + k));
      prog.push_back(pass(PipeOp::Backward, k));
    }
    for (int k = total - warmup; k < total; ++k) prog.push_back(pass(PipeOp::Backward, k));
    prog.push_back({PipeOp::OptimizerStep, 0});
  }
  return s;
}

PipeSchedule zb_h1_schedule(int p, int m) {
  return zero_bubble_schedule(
      Schedule::ZBH1, p, m, [p](int r) { return p - r; }, [](int r) { return r; });
}

PipeSchedule zb_h2_schedule(int p, int m) {
  return zero_bubble_schedule(
      Schedule::ZBH2, p, m, [p](int r) { return 2 * (p - r) - 1; }, [](int r) { return 2 * r; });
}

PipeSchedule xpipe_schedule(int p, int t, int mini_batches) {
  PipeSchedule s = empty_schedule(Schedule::XPipe, p, t, mini_batches);
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    one_f_one_b_order(
        p, r, t * mini_batches,
        [&](PipeOp op, int mb) {
          prog.push_back({PipeOp::PredictWeights, mb});
          prog.push_back({op, mb});
          prog.push_back({PipeOp::RestoreWeights, mb});
        },
        [&](int mb) {
          if (mb % t == t - 1) prog.push_back({PipeOp::OptimizerStep, mb / t});
        });
  }
  insert_communication(s);
  insert_tied_exchange(s);
  assign_prediction_steps(s);
  return s;
}

size_t forward_pass_start(const StageProgram& program, int mb) {
  for (size_t i = 0; i < program.size(); ++i) {
    const PipeInstr& in = program[i];
    if (in.mb == mb && (in.op == PipeOp::RecvAct || in.op == PipeOp::PredictWeights || in.op == PipeOp::Forward))
      return i;  // a micro-batch's forward pass comes before its backward pass
  }
  return program.size();
}

int xpipe_stop_lookahead(const PipeSchedule& s) {
  const int t = s.micro_batches, k = s.mini_batches;
  int lookahead = 0;
  for (const auto& program : s.programs) {
    std::vector<size_t> pass_start(size_t(t) * size_t(k), program.size());  // forward_pass_start of every mb
    for (size_t i = program.size(); i-- > 0;) {
      const PipeInstr& in = program[i];
      if (in.mb >= 0 && size_t(in.mb) < pass_start.size() &&
          (in.op == PipeOp::RecvAct || in.op == PipeOp::PredictWeights || in.op == PipeOp::Forward))
        pass_start[size_t(in.mb)] = i;
    }
    for (size_t i = 0; i < program.size(); ++i) {
      if (program[i].op != PipeOp::OptimizerStep) continue;
      const int n = program[i].mb;
      while (n + 1 + lookahead < k && pass_start[size_t(t * (n + 1 + lookahead) - 1)] < i) ++lookahead;
    }
  }
  return lookahead;
}

int peak_in_flight(const StageProgram& program, int chunk) {
  int now = 0, peak = 0;
  for (const auto& in : program) {
    if (in.chunk != chunk) continue;
    if (in.op == PipeOp::Forward) peak = std::max(peak, ++now);
    if (in.op == PipeOp::Backward || in.op == PipeOp::BackwardWeight) --now;
  }
  return peak;
}

bool one_forward_at_a_time(const StageProgram& program) {
  int open = -1;  // the micro-batch whose forward ran and whose backward has not begun
  for (const auto& in : program) {
    if (in.op == PipeOp::Forward) {
      if (open >= 0) return false;
      open = in.mb;
    } else if ((in.op == PipeOp::Backward || in.op == PipeOp::BackwardInput) && in.mb == open) {
      open = -1;
    }
  }
  return true;
}

void insert_communication(PipeSchedule& s) {
  const int p = s.stages, v = s.virtual_stages;
  for (int r = 0; r < p; ++r) {
    StageProgram compute, out;
    for (const auto& i : s.programs[r]) {
      const bool is_comm =
          i.op == PipeOp::SendAct || i.op == PipeOp::RecvAct || i.op == PipeOp::SendGrad || i.op == PipeOp::RecvGrad;
      if (!is_comm) compute.push_back(i);  // rebuilt below, so the pass is idempotent (tied messages stay)
    }
    for (size_t k = 0; k < compute.size(); ++k) {
      const PipeInstr& i = compute[k];
      // a pass's input arrives before its weights are predicted (PREDICT directly precedes it)
      const PipeInstr& pass = i.op == PipeOp::PredictWeights && k + 1 < compute.size() ? compute[k + 1] : i;
      const bool first_of_pass =
          i.op == PipeOp::PredictWeights || k == 0 || compute[k - 1].op != PipeOp::PredictWeights;
      const auto takes_grad = [](PipeOp op) { return op == PipeOp::Backward || op == PipeOp::BackwardInput; };
      // the model's first part (stage 0's chunk 0) reads the data, its last part (stage
      // p - 1's chunk v - 1) the targets; every other part talks to its neighbours
      const bool model_first = r == 0 && pass.chunk == 0, model_last = r == p - 1 && pass.chunk == v - 1;
      const int prev = (r + p - 1) % p, next = (r + 1) % p;
      if (first_of_pass && (i.op == PipeOp::PredictWeights || i.op == PipeOp::Forward || takes_grad(i.op))) {
        if (pass.op == PipeOp::Forward && !model_first)
          out.push_back({PipeOp::RecvAct, pass.mb, prev, 0, 0, pass.chunk});
        if (takes_grad(pass.op) && !model_last) out.push_back({PipeOp::RecvGrad, pass.mb, next, 0, 0, pass.chunk});
      }
      out.push_back(i);
      if (i.op == PipeOp::Forward && !model_last) out.push_back({PipeOp::SendAct, i.mb, next, 0, 0, i.chunk});
      if (takes_grad(i.op) && !model_first) out.push_back({PipeOp::SendGrad, i.mb, prev, 0, 0, i.chunk});
    }
    s.programs[r] = std::move(out);
  }
}

void insert_tied_exchange(PipeSchedule& s) {
  const int p = s.stages, last = p - 1;
  if (p < 2) return;
  const auto is_tied = [](const PipeInstr& i) {
    return i.op == PipeOp::SendTiedGrad || i.op == PipeOp::RecvTiedGrad || i.op == PipeOp::SendTiedWeights ||
           i.op == PipeOp::RecvTiedWeights;
  };
  for (auto& prog : s.programs) prog.erase(std::remove_if(prog.begin(), prog.end(), is_tied), prog.end());
  // around each update: the last stage's share goes to the first stage, which updates and sends back
  for (int r : {0, last}) {
    StageProgram out;
    for (const auto& i : s.programs[r]) {
      if (i.op == PipeOp::OptimizerStep && r == 0) out.push_back({PipeOp::RecvTiedGrad, i.mb, last});
      if (i.op == PipeOp::OptimizerStep && r == last) out.push_back({PipeOp::SendTiedGrad, i.mb, 0});
      out.push_back(i);
      if (i.op == PipeOp::OptimizerStep && r == 0) out.push_back({PipeOp::SendTiedWeights, i.mb, last});
    }
    s.programs[r] = std::move(out);
  }
  // The last stage takes version n at its first pass that starts after the first stage
  // sent it (in the unit-cost simulation) and after its own share of n left: a fixed,
  // deterministic point that cannot deadlock (the simulation below checks), which costs
  // no wait when the stages run as simulated.
  const PipeSimulation sim = simulate_schedule(s);
  if (sim.deadlock) return;  // reported by whoever simulates the list
  std::vector<double> sent_at(s.mini_batches, 0.0);
  for (size_t k = 0; k < s.programs[0].size(); ++k)
    if (s.programs[0][k].op == PipeOp::SendTiedWeights) sent_at[s.programs[0][k].mb] = sim.times[0][k].first;
  StageProgram out;
  int next = 0;         // the next version the last stage takes
  int shares_sent = 0;  // its own gradient shares sent so far
  const auto& prog = s.programs[last];
  for (size_t k = 0; k < prog.size(); ++k) {
    const bool pass_begins =
        prog[k].op == PipeOp::PredictWeights || ((prog[k].op == PipeOp::Forward || prog[k].op == PipeOp::Backward) &&
                                                 (k == 0 || prog[k - 1].op != PipeOp::PredictWeights));
    if (pass_begins)
      while (next < shares_sent && sent_at[next] <= sim.times[last][k].first)
        out.push_back({PipeOp::RecvTiedWeights, next++, 0});
    if (prog[k].op == PipeOp::SendTiedGrad) ++shares_sent;
    out.push_back(prog[k]);
  }
  while (next < s.mini_batches) out.push_back({PipeOp::RecvTiedWeights, next++, 0});  // the drain
  s.programs[last] = std::move(out);
}

PipeSchedule forward_only_schedule(int stages, int micro_batches, int virtual_stages) {
  PipeSchedule s =
      empty_schedule(virtual_stages > 1 ? Schedule::Interleaved : Schedule::GPipe, stages, micro_batches, 1);
  s.virtual_stages = virtual_stages;
  for (auto& prog : s.programs)
    for (int mb = 0; mb < micro_batches; ++mb)
      for (int c = 0; c < virtual_stages; ++c) prog.push_back({PipeOp::Forward, mb, -1, 0, 0, c});
  insert_communication(s);
  return s;
}

PipeSchedule make_schedule(Schedule schedule, int stages, int micro_batches, int mini_batches, int virtual_stages) {
  PipeSchedule s;
  switch (schedule) {
    case Schedule::GPipe:
      s = gpipe_schedule(stages, micro_batches);
      break;
    case Schedule::OneFOneB:
      s = one_f_one_b_schedule(stages, micro_batches);
      break;
    case Schedule::Interleaved:
      s = interleaved_schedule(stages, micro_batches, virtual_stages);
      s.kind = Schedule::Interleaved;
      break;
    case Schedule::ZBH1:
      s = zb_h1_schedule(stages, micro_batches);
      break;
    case Schedule::ZBH2:
      s = zb_h2_schedule(stages, micro_batches);
      break;
    case Schedule::XPipe:
      return xpipe_schedule(stages, micro_batches, mini_batches);
  }
  insert_communication(s);
  return s;
}

}  // namespace strata
