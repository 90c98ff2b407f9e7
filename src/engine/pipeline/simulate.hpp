#pragma once
// Running a pipeline schedule on paper: a discrete-event simulation of every stage's
// instruction list with given costs (unit costs by default), where a receive waits for
// its matching send. It finds deadlocks, measures the bubble and the micro-batches in
// flight, and is the clock XPipe's weight prediction is derived from.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/pipeline/pipe_program.hpp"

namespace strata {

struct PipeCosts {
  double forward = 1, backward = 1, optimizer = 0;
  // the share of a backward that is its weight half (BackwardWeight; BackwardInput the
  // rest): about half where products dominate (dX = dY W^T and dW = X^T dY cost the same)
  double weight_share = 0.5;
  // per stage, where stages differ (the planner's): override forward / backward when set
  std::vector<double> stage_forward, stage_backward;
  std::vector<double>
      stage_weight_half;  // per stage, where set: the weight half's cost (else weight_share of the backward)
  // a message's time from its send to its arrival: activations and gradients; XPipe's
  // share of the tied embedding's gradient, and its new version (weights and both moments)
  double transfer = 0, tied_grad_transfer = 0, tied_weights_transfer = 0;
  // XPipe, per stage: a weight prediction, charged where a PredictWeights looks ahead by a
  // different amount than the prediction in place (the engine reuses an equal one; an
  // update or a tied-weights message puts the true weights back)
  std::vector<double> stage_predict;
  // Variability: the share by which a pass (Forward, Backward or a half) on a stage is
  // slowed, e.g. [variability]'s draws (slowdown_share); unset: none.
  std::function<double(int stage, const PipeInstr& pass)> slowdown;
  double forward_of(int stage) const { return stage_forward.empty() ? forward : stage_forward[size_t(stage)]; }
  double backward_of(int stage) const { return stage_backward.empty() ? backward : stage_backward[size_t(stage)]; }
  double weight_half_of(int stage) const {
    return stage_weight_half.empty() ? backward_of(stage) * weight_share : stage_weight_half[size_t(stage)];
  }
  double input_half_of(int stage) const { return backward_of(stage) - weight_half_of(stage); }
  double transfer_of(PipeOp send) const;
};

struct PipeSimulation {
  bool deadlock = false;
  std::string deadlock_report;  // the instruction each unfinished stage is stuck at
  double makespan = 0;
  std::vector<double> busy;                                   // per stage: time in Forward and Backward (or its halves)
  std::vector<std::vector<std::pair<double, double>>> times;  // per stage, per instruction: (start, end)
  std::vector<int> peak_in_flight;  // per stage: most forwards whose backward (weight half) had not run
  // Idle share of the stages over the makespan: 1 - sum(busy) / (p * makespan).
  double bubble_fraction() const;
};

PipeSimulation simulate_schedule(const PipeSchedule& s, const PipeCosts& costs = {});
// The time of one pass (Forward, Backward or a half) on `stage`, its slowdown included; 0
// for other instructions but the update (costs.optimizer).
double pass_cost(const PipeSchedule& s, const PipeCosts& costs, int stage, const PipeInstr& in);

// Static checks, no simulation: on every stage each Backward follows its Forward, and
// every micro-batch is run forward and backward once (or its BackwardInput once after the
// forward and its BackwardWeight once after that); between every pair of stages, the
// sends of each kind match the receives in order (same micro-batches, same sequence).
// Returns "" or the first violation found.
std::string check_schedule(const PipeSchedule& s);

// XPipe: sets the `steps` of every PredictWeights to the number of this stage's
// optimizer updates from the start of the pass it guards until stage 0 finishes the
// backward of the last micro-batch of the pass's mini-batch (when that mini-batch's
// update is due), in the simulation with `costs`.
void assign_prediction_steps(PipeSchedule& s, const PipeCosts& costs = {});

}  // namespace strata
