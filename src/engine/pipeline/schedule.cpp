#include "engine/pipeline/schedule.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "engine/pipeline/simulate.hpp"

namespace strata {
namespace {

PipeSchedule empty_schedule(const std::string& name, int stages, int micro_batches, int mini_batches) {
  if (stages < 1 || micro_batches < 1 || mini_batches < 1)
    throw UserError("pipeline schedule " + name + ": stages, micro-batches and mini-batches must be >= 1");
  PipeSchedule s;
  s.name = name;
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
  PipeSchedule s = empty_schedule("gpipe", p, m, 1);
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    for (int i = 0; i < m; ++i) prog.push_back({PipeOp::Forward, i});
    for (int i = 0; i < m; ++i) prog.push_back({PipeOp::Backward, i});
    prog.push_back({PipeOp::OptimizerStep, 0});
  }
  return s;
}

PipeSchedule one_f_one_b_schedule(int p, int m) {
  PipeSchedule s = empty_schedule("1f1b", p, m, 1);
  for (int r = 0; r < p; ++r) {
    auto& prog = s.programs[r];
    one_f_one_b_order(p, r, m, [&](PipeOp op, int mb) { prog.push_back({op, mb}); }, [](int) {});
    prog.push_back({PipeOp::OptimizerStep, 0});
  }
  return s;
}

PipeSchedule xpipe_schedule(int p, int t, int mini_batches) {
  PipeSchedule s = empty_schedule("xpipe", p, t, mini_batches);
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
  assign_prediction_steps(s);
  return s;
}

void insert_communication(PipeSchedule& s) {
  const int p = s.stages;
  for (int r = 0; r < p; ++r) {
    StageProgram compute, out;
    for (const auto& i : s.programs[r]) {
      const bool is_comm = i.op == PipeOp::SendAct || i.op == PipeOp::RecvAct || i.op == PipeOp::SendGrad ||
                           i.op == PipeOp::RecvGrad;
      if (!is_comm) compute.push_back(i);  // rebuilt below, so the pass is idempotent
    }
    for (size_t k = 0; k < compute.size(); ++k) {
      const PipeInstr& i = compute[k];
      // a pass's input arrives before its weights are predicted (PREDICT directly precedes it)
      const PipeInstr& pass = i.op == PipeOp::PredictWeights && k + 1 < compute.size() ? compute[k + 1] : i;
      const bool first_of_pass = i.op == PipeOp::PredictWeights || k == 0 || compute[k - 1].op != PipeOp::PredictWeights;
      if (first_of_pass && (i.op == PipeOp::PredictWeights || i.op == PipeOp::Forward || i.op == PipeOp::Backward)) {
        if (pass.op == PipeOp::Forward && r > 0) out.push_back({PipeOp::RecvAct, pass.mb, r - 1});
        if (pass.op == PipeOp::Backward && r + 1 < p) out.push_back({PipeOp::RecvGrad, pass.mb, r + 1});
      }
      out.push_back(i);
      if (i.op == PipeOp::Forward && r + 1 < p) out.push_back({PipeOp::SendAct, i.mb, r + 1});
      if (i.op == PipeOp::Backward && r > 0) out.push_back({PipeOp::SendGrad, i.mb, r - 1});
    }
    s.programs[r] = std::move(out);
  }
}

std::string to_string(const PipeInstr& i) {
  const std::string mb = std::to_string(i.mb), peer = "->" + std::to_string(i.peer);
  switch (i.op) {
    case PipeOp::Forward: return "F" + mb;
    case PipeOp::Backward: return "B" + mb;
    case PipeOp::OptimizerStep: return "STEP" + mb;
    case PipeOp::PredictWeights: return "PREDICT(s=" + std::to_string(i.steps) + ")";
    case PipeOp::RestoreWeights: return "RESTORE";
    case PipeOp::SendAct: return "SEND_ACT" + mb + peer;
    case PipeOp::RecvAct: return "RECV_ACT" + mb + "<-" + std::to_string(i.peer);
    case PipeOp::SendGrad: return "SEND_GRAD" + mb + peer;
    case PipeOp::RecvGrad: return "RECV_GRAD" + mb + "<-" + std::to_string(i.peer);
  }
  return "?";
}

std::string to_string(const PipeSchedule& s) {
  std::string out = s.name + ": " + std::to_string(s.stages) + " stages, " + std::to_string(s.micro_batches) +
                    " micro-batches" + (s.mini_batches > 1 ? " x " + std::to_string(s.mini_batches) + " mini-batches" : "") +
                    "\n";
  for (int r = 0; r < s.stages; ++r) {
    out += "stage " + std::to_string(r) + ":";
    for (const auto& i : s.programs[r]) out += " " + to_string(i);
    out += "\n";
  }
  return out;
}

PipeSchedule make_schedule(const std::string& name, int stages, int micro_batches, int mini_batches) {
  PipeSchedule s;
  if (name == "gpipe") s = gpipe_schedule(stages, micro_batches);
  else if (name == "1f1b") s = one_f_one_b_schedule(stages, micro_batches);
  else if (name == "xpipe") return xpipe_schedule(stages, micro_batches, mini_batches);
  else throw UserError("unknown pipeline schedule \"" + name + "\" (gpipe, 1f1b or xpipe)");
  insert_communication(s);
  return s;
}

}  // namespace strata
