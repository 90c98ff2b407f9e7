#include "engine/pipeline/ready_dispatch.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/pipeline/schedule.hpp"

namespace strata {
namespace {
bool is_pass(PipeOp op) {
  return op == PipeOp::Forward || op == PipeOp::Backward || op == PipeOp::BackwardInput ||
         op == PipeOp::BackwardWeight;
}
bool is_message(PipeOp op) { return (is_send(op) || is_recv(op)) && message_kind(op) < 2; }  // not XPipe's tied ones
bool frees_cache(PipeOp op) { return op == PipeOp::Backward || op == PipeOp::BackwardWeight; }
bool closes_forward(PipeOp op) { return op == PipeOp::Backward || op == PipeOp::BackwardInput; }
}  // namespace

ReadyDispatch::ReadyDispatch(const StageProgram& program, int in_flight_cap, bool halves_in_order)
    : halves_in_order_(halves_in_order) {
  int chunks = 1, mbs = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    const PipeInstr& in = program[i];
    if (in.op == PipeOp::OptimizerStep && i + 1 == program.size()) break;
    if (!is_pass(in.op) && !is_message(in.op))
      throw std::logic_error("ready dispatch: " + to_string(in) + " is not a pass or its message");
    chunks = std::max(chunks, in.chunk + 1);
    mbs = std::max(mbs, in.mb + 1);
    const bool recv = is_recv(in.op);
    if (recv || (is_pass(in.op) && (i == 0 || !is_recv(program[i - 1].op)))) {
      StageTask t;
      t.first = i;
      t.receives = recv;
      tasks_.push_back(t);
    }
    if (tasks_.empty()) throw std::logic_error("ready dispatch: a send before any pass");
    StageTask& t = tasks_.back();
    if (is_pass(in.op)) {
      t.op = in.op;
      t.mb = in.mb;
      t.chunk = in.chunk;
    }
    t.end = i + 1;
  }
  chunks_.resize(size_t(chunks));
  for (auto& c : chunks_) {
    c.forward_done.assign(size_t(mbs), 0);
    c.input_done.assign(size_t(mbs), 0);
  }
  for (size_t k = 0; k < tasks_.size(); ++k) {  // the streams and the program's peaks
    const StageTask& t = tasks_[k];
    Chunk& c = chunks_[size_t(t.chunk)];
    stream_of(c, t.op).tasks.push_back(int(k));
    if (t.op == PipeOp::Forward) {
      c.peak_in_flight = std::max(c.peak_in_flight, ++c.in_flight);
      c.peak_open = std::max(c.peak_open, ++c.open);
    }
    if (frees_cache(t.op)) --c.in_flight;
    if (closes_forward(t.op)) --c.open;
    if (t.op == PipeOp::BackwardInput) c.peak_halves = std::max(c.peak_halves, ++c.halves);
    if (t.op == PipeOp::BackwardWeight) --c.halves;
  }
  for (auto& c : chunks_) {
    c.in_flight = c.open = c.halves = 0;
    // room for more forwards ahead of their backwards (not on a stage that runs one
    // forward at a time: its loss layer's cache is shared)
    const int cap = std::min(in_flight_cap, int(c.forwards.tasks.size()));  // no more than it has micro-batches
    if (cap > c.peak_in_flight && c.peak_open > 1) {
      c.peak_open += cap - c.peak_in_flight;
      c.peak_in_flight = cap;
    }
  }
  ran_.assign(tasks_.size(), 0);
  find_allowed();
}

int cache_slots(const StageProgram& program, int chunk, Dispatch dispatch, int in_flight_cap) {
  const int peak = dispatch == Dispatch::Ready && in_flight_cap > 0
                       ? ReadyDispatch(program, in_flight_cap).in_flight_bound(chunk)
                       : peak_in_flight(program, chunk);
  return std::max(1, peak);
}

ReadyDispatch::Stream& ReadyDispatch::stream_of(Chunk& c, PipeOp op) const {
  if (op == PipeOp::Forward) return c.forwards;
  return op == PipeOp::BackwardWeight && !halves_in_order_ ? c.weights : c.backwards;
}

int ReadyDispatch::hint() const { return first_open_ < tasks_.size() ? int(first_open_) : -1; }

bool ReadyDispatch::may_run(const Chunk& c, int task) const {
  if (task < 0) return false;
  const StageTask& t = tasks_[size_t(task)];
  switch (t.op) {
    case PipeOp::Forward:
      return c.in_flight < c.peak_in_flight && c.open < c.peak_open;
    case PipeOp::BackwardWeight:
      return c.input_done[size_t(t.mb)] != 0;
    case PipeOp::BackwardInput:
      return c.forward_done[size_t(t.mb)] != 0 && c.halves < c.peak_halves;
    default:
      return c.forward_done[size_t(t.mb)] != 0;
  }
}

void ReadyDispatch::find_allowed() {
  allowed_.clear();
  for (const Chunk& c : chunks_)
    for (const Stream* s : {&c.forwards, &c.backwards, &c.weights})
      if (may_run(c, s->head())) allowed_.push_back(s->head());
  std::sort(allowed_.begin(), allowed_.end());
}

void ReadyDispatch::done(int task) {
  const StageTask& t = tasks_[size_t(task)];
  Chunk& c = chunks_[size_t(t.chunk)];
  Stream& s = stream_of(c, t.op);
  if (s.head() != task || !may_run(c, task)) throw std::logic_error("ready dispatch: a task ran out of its turn");
  ++s.next;
  if (t.op == PipeOp::Forward) {
    ++c.in_flight;
    ++c.open;
    c.forward_done[size_t(t.mb)] = 1;
  }
  if (frees_cache(t.op)) --c.in_flight;
  if (closes_forward(t.op)) {
    --c.open;
    c.input_done[size_t(t.mb)] = 1;
  }
  if (t.op == PipeOp::BackwardInput) ++c.halves;
  if (t.op == PipeOp::BackwardWeight) --c.halves;
  ran_[size_t(task)] = 1;
  ++finished_;
  while (first_open_ < tasks_.size() && ran_[first_open_]) ++first_open_;
  find_allowed();
}

}  // namespace strata
