#pragma once
// Pipeline schedules as data (DeepSpeed's PipeSchedule, PyTorch's pipelining IR): for each
// stage, the list of instructions it runs, in order. Generators emit compute only
// (Forward, Backward, OptimizerStep, and for XPipe the weight prediction around each
// pass); insert_communication() adds the sends and receives between neighbouring
// stages; one executor runs any list, and simulate_schedule() (simulate.hpp) runs it on
// paper with unit costs. No MPI here: the lists are plain values, testable and printable.
#include <string>
#include <utility>
#include <vector>

#include "core/deck_choices.hpp"
#include "engine/pipeline/pipe_program.hpp"

namespace strata {

// GPipe (fill-drain): all m forwards, then all m backwards, then the update.
PipeSchedule gpipe_schedule(int stages, int micro_batches);
// 1F1B (PipeDream-Flush, Megatron's default): stage r runs min(p - r - 1, m) warm-up
// forwards, then alternates one forward and one backward, then drains; then the update.
PipeSchedule one_f_one_b_schedule(int stages, int micro_batches);
// Interleaved 1F1B (Narayanan et al., 2021; Megatron-LM): the model is cut into p v
// chunks and stage r holds chunks r, r + p, ..., r + (v - 1) p, so a micro-batch passes
// every stage v times. Stage r runs (p - r - 1) 2 + (v - 1) p warm-up forwards (all of
// them when m = p), then alternates one forward and one backward, then drains; forwards
// take the chunks in groups of p micro-batches (chunk 0 for micro-batches 0..p-1, then
// chunk 1, ...), backwards the same from the last chunk. m must be a multiple of p. The
// bubble shrinks to (p - 1)/(v m) of the ideal time, for v times the messages. v = 1 is
// 1F1B.
PipeSchedule interleaved_schedule(int stages, int micro_batches, int virtual_stages);
// An evaluation: forwards only, micro-batch after micro-batch, each through the model's
// parts in order (stage r's chunk c is the model's part c p + r), with their messages.
PipeSchedule forward_only_schedule(int stages, int micro_batches, int virtual_stages = 1);

// Zero bubble (Qi et al., ICLR 2024): the backward split into BackwardInput (I, on the
// critical path) and BackwardWeight (W, which can wait). Stage r runs `warmup(r)`
// forwards, then for each micro-batch its I, the W's of the oldest micro-batches while
// more than `deferred(r)` wait, and the next forward; then the remaining W's.
// ZB-H1: warmup p - r, deferred r: at most p micro-batches between a forward and its W on
// every stage (1F1B's peak, stage 0's), bubble (p - 1)(F + I - W) against 1F1B's
// (p - 1)(F + I + W). ZB-H2: warmup 2(p - r) - 1, deferred 2r: up to 2p - 1 in flight,
// the warm-up filled with forwards and the drain with W's, so that with I slower than W or
// with transfer latency stages still wait less (the makespan with a flush is at least
// m(F + I + W) + (p - 1)F for either).
PipeSchedule zb_h1_schedule(int stages, int micro_batches);
PipeSchedule zb_h2_schedule(int stages, int micro_batches);

// XPipe: the micro-batches of `mini_batches` consecutive mini-batches (T each) stream
// through a 1F1B pipeline without a flush; a stage updates its weights after the backward
// of each mini-batch's last micro-batch, and runs every forward and backward on weights
// predicted `steps` updates ahead, derived from the list (assign_prediction_steps()).
// The tied embedding is updated by the first stage alone: the last stage sends it its
// gradient share of each mini-batch and takes the updated weights back at the first pass
// the simulation places after that update (insert_tied_exchange()).
PipeSchedule xpipe_schedule(int stages, int micro_batches_per_mini_batch, int mini_batches);

// XPipe, stopping a stream early: a stage may switch from the list of a stream of k
// mini-batches to the list of k' < k at the first instruction of the forward pass (its
// RecvAct or PredictWeights) of micro-batch k' T - 1, the last of mini-batch k' - 1: up to
// there the two lists agree in every instruction but the look-ahead of predictions
// (checked in tests). The stop is agreed at the stages' updates: a request seen at the
// update of mini-batch n ends the stream after mini-batch n + L, where L is the smallest
// look-ahead for which every stage has made that update before the pass where it must
// switch. Returns L.
int xpipe_stop_lookahead(const PipeSchedule& s);
// The first instruction of the forward pass of micro-batch mb on `stage` (its RecvAct or
// PredictWeights, else the Forward): the index where a stop must be known.
size_t forward_pass_start(const StageProgram& program, int mb);

// Whether each forward in the list is followed by its micro-batch's backward (or input
// half) before the next forward, as on the last stage of 1F1B, ZB-H1, ZB-H2 and XPipe
// (not GPipe): the stage's loss layer then keeps one micro-batch's activations for all.
bool one_forward_at_a_time(const StageProgram& program);

// The most forwards of `chunk` whose backward (or weight half) had not run, in program
// order: the caches the stage keeps for that chunk.
int peak_in_flight(const StageProgram& program, int chunk = 0);

// Adds RecvAct before each Forward and SendAct after it (except at the pipeline's ends),
// RecvGrad before each Backward or BackwardInput and SendGrad after it. Idempotent on
// lists that have them.
void insert_communication(PipeSchedule& s);

// XPipe, p > 1: adds the tied embedding's messages (the Send/RecvTied* instructions) to a
// list that has its activation and gradient messages.
void insert_tied_exchange(PipeSchedule& s);

// The list of a schedule (mini_batches: XPipe's stream length; 1 for flushing schedules;
// virtual_stages: interleaved 1F1B's chunks per stage).
PipeSchedule make_schedule(Schedule schedule, int stages, int micro_batches, int mini_batches = 1,
                           int virtual_stages = 1);

}  // namespace strata
