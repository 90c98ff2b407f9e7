#pragma once
// Readiness-first dispatch (parallel.dispatch = "ready"; RRFP, arXiv 2605.18750): a
// stage's program becomes a non-binding hint. Each pass of it (a Forward, Backward, or a
// zero-bubble half, with the receive before it and the sends after it) is a task; when the
// stage is free it runs the highest-ranked task (earliest in the program) that the rules
// below allow and whose input has arrived, so a late message does not hold up work whose
// message is there. The rules, per chunk of the stage:
//  - each kind of pass keeps the program's order among its micro-batches: forwards in
//    order, backwards (or input halves) in order, weight halves in order. What a pass
//    accumulates over micro-batches (its weight gradients, ZeRO-2's unit sums) is then
//    summed in the same order as the fixed program's, and a "ready" run gives its bits;
//  - a backward (input half) follows its micro-batch's forward, a weight half its input half;
//  - memory: never more forwards whose backward (weight half) has not run than the
//    program's peak (the activation caches it was planned for), and never more forwards
//    whose backward (input half) has not run than the program's peak of those (1 on a
//    last stage that shares its loss layer's cache), nor more input halves whose weight
//    half has not run than the program's peak of those (ZeRO-2's gradient slots);
//    parallel.dispatch_in_flight may allow more forwards in flight (not on a stage that
//    runs one forward at a time), for their caches' memory.
// The program's next task in order is always allowed once the tasks before it ran, so the
// rules never stop a stage that the fixed order would let go on. No MPI here: the executor
// asks whether inputs arrived, the simulator answers from its clock.
#include <cstddef>
#include <vector>

#include "core/deck_choices.hpp"
#include "engine/pipeline/pipe_program.hpp"

namespace strata {

struct StageTask {
  PipeOp op;         // Forward, Backward, BackwardInput or BackwardWeight
  int mb = 0;        // micro-batch
  int chunk = 0;     // the stage's chunk (interleaved)
  size_t first = 0;  // the program's instructions [first, end): the receive, the pass, its sends
  size_t end = 0;
  bool receives = false;  // first is a RecvAct / RecvGrad
  size_t pass() const { return first + (receives ? 1 : 0); }
};

class ReadyDispatch {
 public:
  // Throws std::logic_error on an instruction other than a pass, its messages or a
  // trailing OptimizerStep (XPipe's lists: dispatched in order).
  // in_flight_cap: the most forwards in flight per chunk, where larger than the program's
  // peak (parallel.dispatch_in_flight; 0: the program's peak). halves_in_order: input and
  // weight halves keep their order among each other too (ZeRO-2 and 3: a unit's gradient
  // slot gathers the input halves run before a weight half, which it then sums over the
  // replicas, so the halves' interleaving decides which micro-batches each sum adds).
  explicit ReadyDispatch(const StageProgram& program, int in_flight_cap = 0, bool halves_in_order = false);

  const std::vector<StageTask>& tasks() const { return tasks_; }
  // The tasks the rules allow now, in program order (at most three per chunk).
  const std::vector<int>& allowed() const { return allowed_; }
  // The first task in program order that has not run: what the fixed order would run.
  int hint() const;
  void done(int task);
  bool finished() const { return finished_ == tasks_.size(); }
  // The most forwards of `chunk` in flight (whose backward or weight half has not run).
  int in_flight_bound(int chunk) const { return chunks_[size_t(chunk)].peak_in_flight; }
  // The picked task among allowed(): the first for which arrived(task) holds, or -1.
  template <class Arrived>
  int pick(Arrived arrived) const {
    for (int t : allowed_)
      if (arrived(tasks_[size_t(t)])) return t;
    return -1;
  }

 private:
  struct Stream {  // one kind of pass of one chunk, in program order
    std::vector<int> tasks;
    size_t next = 0;
    int head() const { return next < tasks.size() ? tasks[next] : -1; }
  };
  struct Chunk {
    Stream forwards, backwards, weights;  // backwards: Backward or BackwardInput (and halves_in_order: BackwardWeight)
    int peak_in_flight = 0, peak_open = 0, peak_halves = 0;  // the bounds
    int in_flight = 0, open = 0, halves = 0;                  // now
    std::vector<char> forward_done, input_done;  // per micro-batch
  };
  bool may_run(const Chunk& c, int task) const;
  Stream& stream_of(Chunk& c, PipeOp op) const;
  void find_allowed();

  std::vector<StageTask> tasks_;
  std::vector<Chunk> chunks_;
  std::vector<char> ran_;
  std::vector<int> allowed_;
  size_t finished_ = 0, first_open_ = 0;
  bool halves_in_order_ = false;
};

// The activation caches a stage keeps for `chunk` of its program: the most micro-batches
// it can have in flight there under `dispatch` (ready: with parallel.dispatch_in_flight =
// in_flight_cap); at least one. The executor allocates them, the planner predicts them.
int cache_slots(const StageProgram& program, int chunk, Dispatch dispatch, int in_flight_cap);

}  // namespace strata
