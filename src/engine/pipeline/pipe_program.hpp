#pragma once
// A pipeline schedule's instruction lists as plain values (schedule.hpp makes them,
// simulate.hpp runs them on paper, the executor for real): the instructions, a stage's
// program, the schedule; where a stage's send goes; and their printed names.
#include <string>
#include <utility>
#include <vector>

#include "core/deck_choices.hpp"

namespace strata {

enum class PipeOp {
  Forward,         // forward of micro-batch mb through this stage's layers
  Backward,        // backward of micro-batch mb (after its forward), accumulating gradients
  BackwardInput,   // zero-bubble: the gradient of mb's input only (what the previous stage waits for)
  BackwardWeight,  // zero-bubble: mb's weight gradients (after its BackwardInput), filling bubbles
  OptimizerStep,   // update this stage's weights (mb: the mini-batch it completes)
  PredictWeights,  // XPipe: swap in W - steps * lr * m_hat / (sqrt(v_hat) + eps)
  RestoreWeights,  // XPipe: swap the true weights back
  SendAct,         // send micro-batch mb's output activation to stage peer
  RecvAct,         // receive micro-batch mb's input activation from stage peer
  SendGrad,        // send the gradient of micro-batch mb's input to stage peer
  RecvGrad,        // receive the gradient of micro-batch mb's output from stage peer
  // XPipe's tied embedding (first and last stage hold copies; the first stage owns it):
  SendTiedGrad,     // last stage: send its share of mini-batch mb's embedding gradient to peer
  RecvTiedGrad,     // first stage: add the last stage's share before its update of mb
  SendTiedWeights,  // first stage: send the embedding (and Adam moments) after update mb
  RecvTiedWeights,  // last stage: take that version in place of its copy
};

struct PipeInstr {
  PipeOp op;
  int mb = -1;         // micro-batch (a running index over mini-batches for XPipe)
  int peer = -1;       // stage on the other end of a send/receive
  int steps = 0;       // PredictWeights: optimizer updates to look ahead (XPipe's s)
  int tied_steps = 0;  // PredictWeights on the last stage: the same for its embedding copy
  int chunk = 0;       // interleaved: which of the stage's model chunks (its chunk c is the model's part c p + stage)
  bool operator==(const PipeInstr& o) const {
    return op == o.op && mb == o.mb && peer == o.peer && steps == o.steps && tied_steps == o.tied_steps &&
           chunk == o.chunk;
  }
};

using StageProgram = std::vector<PipeInstr>;

struct PipeSchedule {
  Schedule kind = Schedule::OneFOneB;
  int stages = 1;                      // p
  int micro_batches = 1;               // per mini-batch (m; XPipe's T)
  int mini_batches = 1;                // mini-batches in the list (1 for flushing schedules)
  int virtual_stages = 1;              // model chunks per stage (v; interleaved 1F1B)
  std::vector<StageProgram> programs;  // one per stage
};

// The message instructions, and their kind: messages of one kind between two stages pair
// up in order (0 activations, 1 gradients, 2 and 3 XPipe's tied embedding's gradient share
// and weights).
inline bool is_send(PipeOp op) {
  return op == PipeOp::SendAct || op == PipeOp::SendGrad || op == PipeOp::SendTiedGrad || op == PipeOp::SendTiedWeights;
}
inline bool is_recv(PipeOp op) {
  return op == PipeOp::RecvAct || op == PipeOp::RecvGrad || op == PipeOp::RecvTiedGrad || op == PipeOp::RecvTiedWeights;
}
inline int message_kind(PipeOp op) {
  switch (op) {
    case PipeOp::SendAct:
    case PipeOp::RecvAct:
      return 0;
    case PipeOp::SendGrad:
    case PipeOp::RecvGrad:
      return 1;
    case PipeOp::SendTiedGrad:
    case PipeOp::RecvTiedGrad:
      return 2;
    default:
      return 3;
  }
}

// Where the message a SendAct or SendGrad of `stage` goes: (stage, chunk) of its
// receiver; activations go to the model's next part, gradients to its previous one.
std::pair<int, int> message_destination(const PipeSchedule& s, int stage, const PipeInstr& send);

// Names as printed: "F3", "B3", "I3" and "W3" (the halves), "F3.1" (on the stage's chunk
// 1, interleaved), "STEP0", "PREDICT(s=2)", "RESTORE", "SEND_ACT3->1",
// "SEND_TIED_GRAD0->0", "PREDICT(s=0,tied=1)", ...
std::string to_string(const PipeInstr& i);
// One line per stage: "stage 0: F0 SEND_ACT0->1 F1 ...".
std::string to_string(const PipeSchedule& s);

}  // namespace strata
