#include "engine/pipeline/pipe_program.hpp"

namespace strata {

std::pair<int, int> message_destination(const PipeSchedule& s, int r, const PipeInstr& send) {
  const int p = s.stages;
  if (send.op == PipeOp::SendAct)
    return r + 1 < p ? std::make_pair(r + 1, send.chunk) : std::make_pair(0, send.chunk + 1);
  if (send.op == PipeOp::SendGrad)
    return r > 0 ? std::make_pair(r - 1, send.chunk) : std::make_pair(p - 1, send.chunk - 1);
  return {send.peer, 0};  // the tied embedding's messages: between the end stages' only chunk
}

std::string to_string(const PipeInstr& i) {
  const std::string mb = std::to_string(i.mb) + (i.chunk > 0 ? "." + std::to_string(i.chunk) : ""),
                    peer = "->" + std::to_string(i.peer);
  switch (i.op) {
    case PipeOp::Forward:
      return "F" + mb;
    case PipeOp::Backward:
      return "B" + mb;
    case PipeOp::BackwardInput:
      return "I" + mb;
    case PipeOp::BackwardWeight:
      return "W" + mb;
    case PipeOp::OptimizerStep:
      return "STEP" + mb;
    case PipeOp::PredictWeights:
      return "PREDICT(s=" + std::to_string(i.steps) + (i.tied_steps ? ",tied=" + std::to_string(i.tied_steps) : "") +
             ")";
    case PipeOp::RestoreWeights:
      return "RESTORE";
    case PipeOp::SendAct:
      return "SEND_ACT" + mb + peer;
    case PipeOp::RecvAct:
      return "RECV_ACT" + mb + "<-" + std::to_string(i.peer);
    case PipeOp::SendGrad:
      return "SEND_GRAD" + mb + peer;
    case PipeOp::RecvGrad:
      return "RECV_GRAD" + mb + "<-" + std::to_string(i.peer);
    case PipeOp::SendTiedGrad:
      return "SEND_TIED_GRAD" + mb + peer;
    case PipeOp::RecvTiedGrad:
      return "RECV_TIED_GRAD" + mb + "<-" + std::to_string(i.peer);
    case PipeOp::SendTiedWeights:
      return "SEND_TIED" + mb + peer;
    case PipeOp::RecvTiedWeights:
      return "RECV_TIED" + mb + "<-" + std::to_string(i.peer);
  }
  return "?";
}

std::string to_string(const PipeSchedule& s) {
  std::string out = to_string(s.kind) + ": " + std::to_string(s.stages) + " stages" +
                    (s.virtual_stages > 1 ? " x " + std::to_string(s.virtual_stages) + " chunks" : "") + ", " +
                    std::to_string(s.micro_batches) + " micro-batches" +
                    (s.mini_batches > 1 ? " x " + std::to_string(s.mini_batches) + " mini-batches" : "") + "\n";
  for (int r = 0; r < s.stages; ++r) {
    out += "stage " + std::to_string(r) + ":";
    for (const auto& i : s.programs[r]) out += " " + to_string(i);
    out += "\n";
  }
  return out;
}

}  // namespace strata
