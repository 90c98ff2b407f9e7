#include "engine/pipeline/stage_executor.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <tuple>

#include "comm/control.hpp"

namespace strata {
namespace {
// Messages of one kind between two stages arrive in order, so tags only guard the
// pairing; they wrap well inside MPI's guaranteed tag range (32767). Interleaved: the
// receiving chunk is part of the tag (a stage pair carries several chunks' messages).
constexpr int activation_tag(int mb, int chunk, int chunks) { return 2 * ((mb * chunks + chunk) % 16000); }
constexpr int gradient_tag(int mb, int chunk, int chunks) { return 2 * ((mb * chunks + chunk) % 16000) + 1; }

bool has_backward(const StageProgram& program) {
  return std::any_of(program.begin(), program.end(),
                     [](const PipeInstr& in) { return in.op == PipeOp::Backward || in.op == PipeOp::BackwardInput; });
}
}  // namespace

// The state of one run of a list: which receives have been posted (and when a ring
// buffer is free for the next one), the micro-batch shape and the sums.
template <class T>
struct StageExecutor<T>::Run {
  typename StageModel<T>::GradReadyFn on_ready;  // (may be empty)
  const PipeSchedule* schedule = nullptr;
  const StageProgram* program = nullptr;  // hooks may switch to a shorter one
  const std::vector<SampleBatch<T>>* batches = nullptr;
  Timers* timers = nullptr;
  ListHooks* hooks = nullptr;
  int m = 1;
  int64_t per_sample = 1, bm = 1;  // loss terms per sample; samples per micro-batch
  BlockContext ctx;
  double global_terms = 1;
  bool counts = false, forward_only = false;
  std::vector<double> loss, correct;  // per micro-batch, summed in micro-batch order at the end

  struct Chunk {  // per chunk of the stage
    int slots = 1, ring = 1;
    bool model_first = false, model_last = false;         // it reads the data; it has the loss
    std::vector<const PipeInstr*> act_recvs, grad_recvs;  // in program order
    size_t act_posted = 0, grad_posted = 0;
    std::vector<char> done;  // per micro-batch: its received messages are read
    bool free_for(int mb) const { return mb < ring || done[size_t(mb - ring)]; }
  };
  std::vector<Chunk> chunks;
};

template <class T>
StageExecutor<T>::StageExecutor(StageModel<T>& model, Comm& pipe)
    : model_(model), pipe_(pipe), stage_(model.placement().stage) {}

template <class T>
StageExecutor<T>::~StageExecutor() = default;

template <class T>
void StageExecutor<T>::ensure_buffers(const BlockContext& ctx, const std::vector<int>& slots) {
  const auto [rows, cols] = model_.boundary_shape(ctx);
  if (chunks_.size() < slots.size()) chunks_.resize(slots.size());
  for (size_t c = 0; c < slots.size(); ++c) {
    ChunkBuffers& cb = chunks_[c];
    // at least `slots`: the buffers only grow, so that lists with fewer micro-batches in
    // flight (an evaluation, a one-step XPipe stream) do not reallocate them in turn
    int n = slots[c];
    const bool same_shape = !cb.act_in.empty() && int64_t(cb.act_in[0].dev.extent(0)) == rows;
    if (same_shape && int(cb.acts.size()) >= n) continue;
    if (same_shape) n = std::max(n, int(cb.acts.size()));
    cb.acts.clear();
    for (int i = 0; i < n; ++i) cb.acts.push_back(model_.make_cache(int(c)));
    for (auto* list : {&cb.act_in, &cb.grad_in, &cb.act_out, &cb.grad_out}) {
      list->assign(list == &cb.act_in || list == &cb.grad_in ? n + 1 : n, Buffer{});
      for (auto& b : *list) {
        b.dev = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "pipeline.message"), rows, cols);
        b.host = Kokkos::create_mirror_view(b.dev);
      }
    }
  }
}

template <class T>
void StageExecutor<T>::send(V2<const T> data, Buffer& staging, int peer, int tag) {
  Kokkos::fence();  // the kernels that produced data are done
  const T* host = data.data();
  if constexpr (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    Kokkos::deep_copy(staging.dev, data);
    Kokkos::deep_copy(staging.host, staging.dev);
    host = staging.host.data();
  }
  staging.request = pipe_.start_send(host, int64_t(data.size()), peer, tag);
}

template <class T>
void StageExecutor<T>::receive_wait(Buffer& b) {
  pipe_.wait(b.request, "recv");
  Kokkos::deep_copy(b.dev, b.host);  // no-op where they are the same memory
}

template <class T>
void StageExecutor<T>::post_receives(Run& st) {
  const int v = int(st.chunks.size());
  for (int c = 0; c < v; ++c) {
    auto& ch = st.chunks[size_t(c)];
    auto& cb = chunks_[size_t(c)];
    for (; ch.act_posted < ch.act_recvs.size() && ch.free_for(ch.act_recvs[ch.act_posted]->mb); ++ch.act_posted) {
      const PipeInstr& in = *ch.act_recvs[ch.act_posted];
      Buffer& b = cb.act_in[size_t(in.mb % ch.ring)];
      b.request = pipe_.start_recv(b.host.data(), b.host.size(), in.peer, activation_tag(in.mb, c, v));
    }
    for (; ch.grad_posted < ch.grad_recvs.size() && ch.free_for(ch.grad_recvs[ch.grad_posted]->mb); ++ch.grad_posted) {
      const PipeInstr& in = *ch.grad_recvs[ch.grad_posted];
      Buffer& b = cb.grad_in[size_t(in.mb % ch.ring)];
      b.request = pipe_.start_recv(b.host.data(), b.host.size(), in.peer, gradient_tag(in.mb, c, v));
    }
  }
}

template <class T>
void StageExecutor<T>::list_receives(Run& st) {
  for (auto& ch : st.chunks) {
    ch.act_recvs.clear();
    ch.grad_recvs.clear();
  }
  for (const auto& in : *st.program) {
    if (in.op == PipeOp::RecvAct) st.chunks[size_t(in.chunk)].act_recvs.push_back(&in);
    if (in.op == PipeOp::RecvGrad) st.chunks[size_t(in.chunk)].grad_recvs.push_back(&in);
  }
}

// Continues in `shorter` at position `at`: the two programs must agree before it, and
// receives posted for micro-batches the shorter program does not have are cancelled.
template <class T>
void StageExecutor<T>::switch_program(Run& st, const StageProgram& shorter, size_t at) {
  for (size_t j = 0; j < at; ++j)
    if (shorter[j].op != (*st.program)[j].op || shorter[j].mb != (*st.program)[j].mb)
      throw std::logic_error("pipeline: the shorter list departs before " + to_string((*st.program)[at]));
  int end_mb = 0;  // the shorter program's micro-batches
  for (const auto& in : shorter)
    if (in.op == PipeOp::Forward) end_mb = std::max(end_mb, in.mb + 1);
  for (size_t c = 0; c < st.chunks.size(); ++c) {
    auto& ch = st.chunks[c];
    auto& cb = chunks_[c];
    size_t kept_act = 0, kept_grad = 0;
    for (auto [list, posted, ring, kept] : {std::make_tuple(&ch.act_recvs, &ch.act_posted, &cb.act_in, &kept_act),
                                            std::make_tuple(&ch.grad_recvs, &ch.grad_posted, &cb.grad_in, &kept_grad)})
      for (size_t j = 0; j < *posted; ++j) {
        if ((*list)[j]->mb < end_mb)
          ++*kept;
        else
          Comm::cancel((*ring)[size_t((*list)[j]->mb % ch.ring)].request);
      }
    ch.act_posted = kept_act;
    ch.grad_posted = kept_grad;
  }
  st.program = &shorter;
  list_receives(st);  // the posted counts stay: the kept receives lead the shorter program's
}

// Receives, the passes and the sends; anything else goes to the hooks.
template <class T>
void StageExecutor<T>::run_instruction(Run& st, const PipeInstr& in) {
  Timers& timers = *st.timers;
  const int v = int(st.chunks.size());
  auto& ch = st.chunks[size_t(in.chunk)];
  auto& cb = chunks_[size_t(in.chunk)];
  // the micro-batch's cache: only the passes and the sends (whose micro-batch is >= 0) read it
  const size_t slot = size_t(in.mb % ch.slots), ring = size_t(in.mb % ch.ring);
  const auto cache = [&]() -> StageCache& { return *cb.acts[slot]; };
  const auto release = [&] {  // its received messages are read: the ring buffers are free
    ch.done[size_t(in.mb)] = 1;
    post_receives(st);
  };
  switch (in.op) {
    case PipeOp::RecvAct:
    case PipeOp::RecvGrad: {
      const size_t posted = in.op == PipeOp::RecvAct ? ch.act_posted : ch.grad_posted;
      const auto& list = in.op == PipeOp::RecvAct ? ch.act_recvs : ch.grad_recvs;
      if (posted == 0 || list[posted - 1]->mb < in.mb)
        throw std::logic_error("pipeline: " + to_string(in) + " was not posted (ring too small)");
      timers.start("pipeline_wait");  // the bubble, as seen from this stage
      receive_wait(in.op == PipeOp::RecvAct ? cb.act_in[ring] : cb.grad_in[ring]);
      timers.stop("pipeline_wait", to_string(in));
      break;
    }
    case PipeOp::Forward: {
      // the slot's previous micro-batch has finished its backward; its sends must be done
      for (auto* out : {&cb.act_out[slot], &cb.grad_out[slot]})
        if (out->request.pending()) pipe_.wait(out->request, "send");
      const int m = st.m;
      const SampleBatch<T> micro =
          (*st.batches)[size_t(in.mb / m)].slice(in.mb % m * st.bm, (in.mb % m + 1) * st.bm, st.per_sample);
      timers.start("forward");
      st.loss[size_t(in.mb)] =
          model_.forward(st.ctx, micro, ch.model_first ? V2<const T>() : V2<const T>(cb.act_in[ring].dev), cache());
      if (st.counts && ch.model_last) st.correct[size_t(in.mb)] = double(model_.correct(cache()));
      pass_done(st, in, "forward");
      if (st.forward_only) release();
      break;
    }
    case PipeOp::Backward:
    case PipeOp::BackwardInput: {
      // the backward reuses the cache's output for gradients: its send must have left
      Buffer& sent = cb.act_out[slot];
      if (sent.request.pending()) pipe_.wait(sent.request, "send");
      const V2<const T> dout = ch.model_last ? V2<const T>() : V2<const T>(cb.grad_in[ring].dev);
      timers.start("backward");
      if (in.op == PipeOp::Backward)
        model_.backward(st.ctx, T(1.0 / st.global_terms), dout, cache(), st.on_ready);
      else
        model_.backward_input(st.ctx, T(1.0 / st.global_terms), dout, cache());
      pass_done(st, in, "backward");
      release();
      break;
    }
    case PipeOp::BackwardWeight:
      timers.start("backward");
      model_.backward_weight(st.ctx, cache(), st.on_ready);
      pass_done(st, in, "backward");
      break;
    case PipeOp::SendAct:  // tagged with the receiving chunk
      send(model_.output(cache()), cb.act_out[slot], in.peer,
           activation_tag(in.mb, message_destination(*st.schedule, stage_, in).second, v));
      break;
    case PipeOp::SendGrad:
      send(model_.input_grad(cache()), cb.grad_out[slot], in.peer,
           gradient_tag(in.mb, message_destination(*st.schedule, stage_, in).second, v));
      break;
    default:
      if (st.hooks) st.hooks->run(in);
  }
}

template <class T>
ListSums StageExecutor<T>::run(const PipeSchedule& s, const std::vector<SampleBatch<T>>& batches, int64_t global_batch,
                               Timers& timers, ListHooks* hooks, const typename StageModel<T>::GradReadyFn& on_ready) {
  Run st;
  st.on_ready = on_ready;
  st.schedule = &s;
  st.program = &s.programs[size_t(stage_)];
  st.batches = &batches;
  st.timers = &timers;
  st.hooks = hooks;
  st.m = s.micro_batches;
  st.per_sample = model_.targets_per_sample();
  st.bm = batches.front().samples / st.m;
  st.ctx = model_.context(st.bm);
  st.global_terms = double(global_batch) * double(st.per_sample);
  st.counts = model_.placement().last() && model_.counts_correct();
  st.forward_only = !has_backward(*st.program);
  const auto& place = model_.placement();
  st.chunks.resize(size_t(s.virtual_stages));
  std::vector<int> slots;
  for (int c = 0; c < s.virtual_stages; ++c) {
    auto& ch = st.chunks[size_t(c)];
    // a forward-only list is done with a micro-batch's cache after its forward
    const Dispatch mode = hooks ? Dispatch::Order : dispatch_;  // (lists with hooks run in order)
    ch.slots = st.forward_only ? 1 : cache_slots(*st.program, c, mode, in_flight_cap_);
    ch.ring = ch.slots + 1;
    ch.model_first = place.model_first(c);
    ch.model_last = place.model_last(c);
    ch.done.assign(size_t(st.m) * size_t(s.mini_batches), 0);
    slots.push_back(ch.slots);
  }
  ensure_buffers(st.ctx, slots);
  st.loss.assign(size_t(st.m) * size_t(s.mini_batches), 0.0);
  st.correct.assign(st.loss.size(), 0.0);
  list_receives(st);
  post_receives(st);
  if (!st.forward_only) delays_.next_step();

  if (dispatch_ == Dispatch::Ready && !hooks && !st.forward_only)
    run_ready(st);
  else
    run_in_order(st);
  timers.start("pipeline_drain");
  for (auto& cb : chunks_)
    for (auto* list : {&cb.act_out, &cb.grad_out})
      for (auto& b : *list)
        if (b.request.pending()) pipe_.wait(b.request, "send");
  timers.stop("pipeline_drain");
  ListSums sums;  // per mini-batch, its micro-batches in order: the same bits in any dispatch order
  sums.loss.assign(size_t(s.mini_batches), 0.0);
  sums.correct.assign(size_t(s.mini_batches), 0.0);
  for (size_t mb = 0; mb < st.loss.size(); ++mb) {
    sums.loss[mb / size_t(st.m)] += st.loss[mb];
    sums.correct[mb / size_t(st.m)] += st.correct[mb];
  }
  return sums;
}

template <class T>
void StageExecutor<T>::run_in_order(Run& st) {
  for (size_t at = 0; at < st.program->size(); ++at) {
    const PipeInstr& in = (*st.program)[at];
    if (st.hooks) {
      if (const StageProgram* shorter = st.hooks->switch_before(in, at)) {
        switch_program(st, *shorter, at);
        --at;  // the same position in the shorter program
        continue;
      }
    }
    run_instruction(st, in);
  }
}

// Readiness first: the group's rank 0 picks the first allowed task whose input is here
// (waiting for any when none is), tells the others, and every rank runs it.
template <class T>
void StageExecutor<T>::run_ready(Run& st) {
  ReadyDispatch dispatch(*st.program, in_flight_cap_, model_.params().zero().gradients_sharded());
  const bool agree = group_ && group_->size() > 1, picks = !agree || group_->rank() == 0;
  Timers& timers = *st.timers;
  while (!dispatch.finished()) {
    int task = picks ? pick_ready(st, dispatch) : -1;
    if (agree) {
      timers.start("dispatch_agree");
      group_->broadcast(&task, int64_t(sizeof task), 0);
      timers.stop("dispatch_agree");
    }
    const StageTask& t = dispatch.tasks()[size_t(task)];
    if (task != dispatch.hint()) {  // a decision the fixed order would not have taken: counted, and on the trace
      timers.start("dispatch_reordered");
      timers.stop("dispatch_reordered", to_string((*st.program)[t.pass()]) + " before " +
                                            to_string((*st.program)[dispatch.tasks()[size_t(dispatch.hint())].pass()]));
    }
    for (size_t i = t.first; i < t.end; ++i) run_instruction(st, (*st.program)[i]);
    dispatch.done(task);
  }
}

template <class T>
int StageExecutor<T>::pick_ready(Run& st, const ReadyDispatch& dispatch) {
  std::vector<Comm::Request*> pending;
  for (;;) {
    const int task = dispatch.pick([&](const StageTask& t) { return inputs_here(st, t); });
    if (task >= 0) return task;
    pending.clear();  // what the allowed tasks wait for
    for (int k : dispatch.allowed())
      for (Buffer* b : task_buffers(st, dispatch.tasks()[size_t(k)]))
        if (b && b->request.pending()) pending.push_back(&b->request);
    if (pending.empty())
      throw std::logic_error("pipeline: ready dispatch found no task that can run on stage " + std::to_string(stage_));
    st.timers->start("pipeline_wait");
    pipe_.wait_any(pending.data(), int(pending.size()), "recv");
    st.timers->stop("pipeline_wait", "wait for any");
  }
}

// What task t waits for: the sends from its slot (a forward reuses both staging buffers, a
// backward the cache's output) and its message (null where it has none).
template <class T>
std::array<typename StageExecutor<T>::Buffer*, 3> StageExecutor<T>::task_buffers(Run& st, const StageTask& t) {
  auto& cb = chunks_[size_t(t.chunk)];
  const auto& ch = st.chunks[size_t(t.chunk)];
  const size_t slot = size_t(t.mb % ch.slots), ring = size_t(t.mb % ch.ring);
  const bool forward = t.op == PipeOp::Forward;
  return {&cb.act_out[slot], forward ? &cb.grad_out[slot] : nullptr,
          !t.receives ? nullptr : forward ? &cb.act_in[ring] : &cb.grad_in[ring]};
}

template <class T>
bool StageExecutor<T>::inputs_here(Run& st, const StageTask& t) {
  if (t.receives) {  // posted yet? (its ring buffer may still hold an earlier micro-batch)
    const auto& ch = st.chunks[size_t(t.chunk)];
    const bool act = t.op == PipeOp::Forward;
    const size_t posted = act ? ch.act_posted : ch.grad_posted;
    const auto& list = act ? ch.act_recvs : ch.grad_recvs;
    if (posted == 0 || list[posted - 1]->mb < t.mb) return false;
  }
  for (Buffer* b : task_buffers(st, t)) {
    if (!b) continue;
    pipe_.progress(&b->request, 1);
    if (b->request.pending()) return false;
  }
  return true;
}

// Stops the pass's timer, then waits out its injected slowdown.
template <class T>
double StageExecutor<T>::pass_done(Run& st, const PipeInstr& in, const char* timer) {
  const double seconds = st.timers->stop(timer, to_string(in));
  if (st.forward_only || !delays_.active()) return seconds;
  st.timers->start("injected_delay");
  delays_.after_pass(in.op, in.mb, in.chunk, seconds);
  st.timers->stop("injected_delay", "slowed " + to_string(in));
  return seconds;
}

template <class T>
BatchResult StageExecutor<T>::evaluate(const PipeSchedule& forward_list, const SampleBatch<T>& batch,
                                       int64_t global_batch, Comm& data) {
  Timers untimed;
  const ListSums sums = run(forward_list, {batch}, global_batch, untimed);
  return sum_over_stages(model_, pipe_, data, sums.loss[0], sums.correct[0], global_batch);
}

template <class T>
int64_t StageExecutor<T>::activation_bytes() const {
  int64_t b = model_.shared_cache_bytes();
  for (const auto& cb : chunks_) {
    for (const auto& a : cb.acts) b += a->bytes();
    for (const auto* list : {&cb.act_in, &cb.grad_in, &cb.act_out, &cb.grad_out})
      for (const auto& m : *list) b += view_bytes(m.dev);  // host mirrors share it on CPUs
  }
  return b;
}

template <class T>
BatchResult sum_over_stages(const StageModel<T>& model, Comm& pipe, Comm& data, double loss_sum, double correct_sum,
                            int64_t global_batch) {
  BatchResult r;
  r.loss =
      data.allreduce_sum(pipe.allreduce_sum(loss_sum)) / (double(global_batch) * double(model.targets_per_sample()));
  if (model.counts_correct()) r.correct = int64_t(data.allreduce_sum(pipe.allreduce_sum(correct_sum)) + 0.5);
  return r;
}

template BatchResult sum_over_stages<float>(const StageModel<float>&, Comm&, Comm&, double, double, int64_t);
template BatchResult sum_over_stages<double>(const StageModel<double>&, Comm&, Comm&, double, double, int64_t);
template class StageExecutor<float>;
template class StageExecutor<double>;

}  // namespace strata
