#include "engine/pipeline/pipeline_engine.hpp"

#include <cmath>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "comm/control.hpp"
#include "core/error.hpp"
#include "engine/pipeline/simulate.hpp"
#include "optim/grad_clip.hpp"
#include "optim/zero_sharding.hpp"

namespace strata {
namespace {
// Messages of one kind between two stages arrive in order, so tags only guard the
// pairing; they wrap well inside MPI's guaranteed tag range (32767).
// Interleaved: the receiving chunk is part of the tag (a stage pair carries several chunks' messages).
constexpr int act_tag(int mb, int chunk = 0, int chunks = 1) { return 2 * ((mb * chunks + chunk) % 16000); }
constexpr int grad_tag(int mb, int chunk = 0, int chunks = 1) { return 2 * ((mb * chunks + chunk) % 16000) + 1; }
constexpr int tied_grad_tag(int n) { return 2 * (n % 16000); }
constexpr int tied_weights_tag(int n) { return 2 * (n % 16000) + 1; }

template <class T>
void add_into(V1<T> y, V1<const T> x) {  // y += x
  Kokkos::parallel_for("pipeline_add", Range(0, y.extent(0)), KOKKOS_LAMBDA(const int64_t i) { y(i) += x(i); });
}
}  // namespace

template <class T>
PipelineEngine<T>::PipelineEngine(StageModel<T>& model, const Grid& grid, Schedule schedule, int micro_batches)
    : TrainEngine<T>(model), data_(grid.data()), pipe_(grid.pipeline()), embedding_(grid.embedding()),
      stop_comm_(grid.control()), schedule_(schedule),
      micro_batches_(micro_batches), stage_(grid.coords().pipeline), stages_(int(grid.shape().pipeline)) {
  if (asynchronous() && stages_ > 1 && model_.tied_index() < 0)
    throw UserError("parallel.schedule = \"xpipe\" runs models with a tied embedding (the GPT); use gpipe or 1f1b");
  if (!asynchronous()) {
    flushing_ = make_schedule(schedule, stages_, micro_batches_, 1, model_.placement().chunk_count());
    const PipeSimulation sim = simulate_schedule(flushing_);
    if (sim.deadlock) throw std::logic_error("pipeline schedule deadlocks: " + sim.deadlock_report);
  }
  // the lists of every stream length share the property (a stream's first list decides)
  model_.share_loss_layer_cache(
      stages_ > 1 && one_forward_at_a_time((asynchronous() ? xpipe_schedule_for(1) : flushing_).programs[stage_]));
}

template <class T>
PipelineEngine<T>::~PipelineEngine() = default;

template <class T>
const PipeSchedule& PipelineEngine<T>::xpipe_schedule_for(int mini_batches) {
  auto it = xpipe_.find(mini_batches);
  if (it != xpipe_.end()) return it->second;
  PipeSchedule s = make_schedule(Schedule::XPipe, stages_, micro_batches_, mini_batches);
  const PipeSimulation sim = simulate_schedule(s);
  if (sim.deadlock) throw std::logic_error("XPipe schedule deadlocks: " + sim.deadlock_report);
  return xpipe_.emplace(mini_batches, std::move(s)).first->second;
}

template <class T>
void PipelineEngine<T>::ensure_buffers(const BlockContext& ctx, const std::vector<int>& slots) {
  const auto [rows, cols] = model_.boundary_shape(ctx);
  chunks_.resize(slots.size());
  for (size_t c = 0; c < slots.size(); ++c) {
    ChunkBuffers& cb = chunks_[c];
    // at least `slots`: the buffers only grow, so that XPipe streams of different lengths
    // (a one-step stream keeps fewer micro-batches in flight) do not reallocate them in turn
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
void PipelineEngine<T>::send(V2<const T> data, Buffer& staging, int peer, int tag) {
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
void PipelineEngine<T>::receive_wait(Buffer& b) {
  pipe_.wait(b.request, "recv");
  Kokkos::deep_copy(b.dev, b.host);  // no-op where they are the same memory
}

template <class T>
void PipelineEngine<T>::send_tied(const std::vector<V1<const T>>& parts, int tag) {
  for (auto& r : tied_out_.requests) embedding_->wait(r, "send");  // the previous version has left
  tied_out_.requests.clear();
  const int64_t n = int64_t(parts.front().extent(0));
  tied_out_.resize(n * int64_t(parts.size()));
  for (size_t i = 0; i < parts.size(); ++i)  // the values change on; the message keeps this version
    Kokkos::deep_copy(tied_out_.part(i, n), parts[i]);
  Kokkos::deep_copy(tied_out_.host, tied_out_.dev);  // no-op where they are the same memory
  for (size_t i = 0; i < parts.size(); ++i)
    tied_out_.requests.push_back(
        embedding_->start_send(tied_out_.host.data() + int64_t(i) * n, n, 1 - embedding_->rank(), tag));
}

template <class T>
V1<const T> PipelineEngine<T>::receive_tied(int64_t n, int parts, int tag) {
  tied_in_.resize(n * parts);
  for (int i = 0; i < parts; ++i)
    tied_in_.requests.push_back(
        embedding_->start_recv(tied_in_.host.data() + int64_t(i) * n, n, 1 - embedding_->rank(), tag));
  for (auto& r : tied_in_.requests) embedding_->wait(r, "recv");
  tied_in_.requests.clear();
  Kokkos::deep_copy(tied_in_.dev, tied_in_.host);
  return tied_in_.dev;
}

template <class T>
void PipelineEngine<T>::TiedMessage::resize(int64_t n) {
  if (int64_t(dev.extent(0)) == n) return;
  dev = Tensor1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "pipeline.tied_message"), n);
  host = Kokkos::create_mirror_view(dev);
}

// The state of one pass over a stage's list: which receives have been posted (and when a
// ring buffer is free for the next one), the micro-batch shape, the losses, and for XPipe
// the weights' versions and the in-stream stop agreement.
template <class T>
struct PipelineEngine<T>::Run {
  const PipeSchedule* schedule = nullptr;
  const StageProgram* program = nullptr;  // a stopped XPipe stream switches to a shorter list
  const std::vector<SampleBatch<T>>* batches = nullptr;
  const StreamUpdate<T>* update = nullptr;  // XPipe only
  std::vector<double>* norms_squared = nullptr;
  Timers* timers = nullptr;
  int64_t first_step = 0;
  int m = 1;
  int64_t per_sample = 1, bm = 1;  // loss terms per sample; samples per micro-batch
  BlockContext ctx;
  double global_terms = 1;
  bool first = false, last = false, tied_copy = false, counts = false;
  std::vector<double> loss;  // per mini-batch

  struct Chunk {  // per chunk of the stage
    int slots = 1, ring = 1;
    bool model_first = false, model_last = false;  // it reads the data; it has the loss
    std::vector<const PipeInstr*> act_recvs, grad_recvs;  // in program order
    size_t act_posted = 0, grad_posted = 0;
    std::vector<char> backward_done;  // per micro-batch
    bool free_for(int mb) const { return mb < ring || backward_done[mb - ring]; }
  };
  std::vector<Chunk> chunks;

  // XPipe: the stage's updates in this stream and the tied embedding's version
  int wte = -1;
  int64_t steps_before = 0, updates = 0, tied_versions = 0;
  bool predicted = false;                   // the store holds predicted weights
  std::pair<int, int> predicted_for{0, 0};  // (steps, tied steps) of that prediction
  // XPipe's early end: see stop_here
  bool stoppable = false;
  int lookahead = 0, mini_batches = 1, next_end = 1;
  StopVotes stop_votes;  // one per update, posted over Grid::control
};

template <class T>
void PipelineEngine<T>::post_receives(Run& st) {
  const int v = int(st.chunks.size());
  for (int c = 0; c < v; ++c) {
    auto& ch = st.chunks[size_t(c)];
    auto& cb = chunks_[size_t(c)];
    for (; ch.act_posted < ch.act_recvs.size() && ch.free_for(ch.act_recvs[ch.act_posted]->mb); ++ch.act_posted) {
      const PipeInstr& in = *ch.act_recvs[ch.act_posted];
      Buffer& b = cb.act_in[size_t(in.mb % ch.ring)];
      b.request = pipe_.start_recv(b.host.data(), b.host.size(), in.peer, act_tag(in.mb, c, v));
    }
    for (; ch.grad_posted < ch.grad_recvs.size() && ch.free_for(ch.grad_recvs[ch.grad_posted]->mb); ++ch.grad_posted) {
      const PipeInstr& in = *ch.grad_recvs[ch.grad_posted];
      Buffer& b = cb.grad_in[size_t(in.mb % ch.ring)];
      b.request = pipe_.start_recv(b.host.data(), b.host.size(), in.peer, grad_tag(in.mb, c, v));
    }
  }
}

template <class T>
void PipelineEngine<T>::list_receives(Run& st) {
  for (auto& ch : st.chunks) {
    ch.act_recvs.clear();
    ch.grad_recvs.clear();
  }
  for (const auto& in : *st.program) {
    if (in.op == PipeOp::RecvAct) st.chunks[size_t(in.chunk)].act_recvs.push_back(&in);
    if (in.op == PipeOp::RecvGrad) st.chunks[size_t(in.chunk)].grad_recvs.push_back(&in);
  }
}

template <class T>
void PipelineEngine<T>::restore_true_weights(Run& st) {
  if (!st.predicted) return;
  st.timers->start("weight_prediction");
  predictor_->restore(model_.params());
  st.timers->stop("weight_prediction", "RESTORE");
  st.predicted = false;
}

// XPipe's early end: each update posts this rank's stop request in a non-blocking
// all-reduce over the job; before the forward pass where the list of a stream ending
// after mini-batch k' - 1 departs from this one, the request of update k' - 1 - L is read
// (schedule.hpp), and if any rank asked, this rank switches to that list. Returns true
// when it switched (the instruction at `at` is then the shorter list's).
template <class T>
bool PipelineEngine<T>::stop_here(Run& st, const PipeInstr& in, size_t at) {
  if (!st.stoppable || st.next_end >= st.mini_batches || in.mb != st.next_end * st.m - 1 ||
      !(in.op == PipeOp::RecvAct || in.op == PipeOp::PredictWeights || in.op == PipeOp::Forward))
    return false;
  const size_t deciding = size_t(st.next_end - 1 - st.lookahead);
  st.timers->start("stop_agreement");
  const bool stop = st.stop_votes.result(int(deciding));
  st.timers->stop("stop_agreement");
  if (!stop) {
    ++st.next_end;
    return false;
  }
  end_stream_early(st, st.next_end, at);
  return true;
}

template <class T>
void PipelineEngine<T>::end_stream_early(Run& st, int k_end, size_t at) {
  const StageProgram& shorter = xpipe_schedule_for(k_end).programs[stage_];
  for (size_t j = 0; j < at; ++j)
    if (shorter[j].op != (*st.program)[j].op || shorter[j].mb != (*st.program)[j].mb)
      throw std::logic_error("XPipe: the list of a " + std::to_string(k_end) + "-step stream departs before " +
                             to_string((*st.program)[at]));
  // receives posted for micro-batches the shorter stream does not have are cancelled
  const int end_mb = k_end * st.m;
  size_t kept_act = 0, kept_grad = 0;
  auto& ch = st.chunks[0];  // XPipe: one chunk
  auto& cb = chunks_[0];
  for (auto [list, posted, ring, kept] : {std::make_tuple(&ch.act_recvs, &ch.act_posted, &cb.act_in, &kept_act),
                                          std::make_tuple(&ch.grad_recvs, &ch.grad_posted, &cb.grad_in, &kept_grad)}) {
    for (size_t j = 0; j < *posted; ++j) {
      if ((*list)[j]->mb < end_mb) {
        ++*kept;
        continue;
      }
      cancel_receive((*ring)[size_t((*list)[j]->mb % ch.ring)].request);
    }
  }
  st.program = &shorter;
  list_receives(st);
  ch.act_posted = kept_act;
  ch.grad_posted = kept_grad;
  st.mini_batches = k_end;
}

// Receives, the passes and the sends: what every schedule runs.
template <class T>
void PipelineEngine<T>::run_pass(Run& st, const PipeInstr& in) {
  Timers& timers = *st.timers;
  const int v = int(st.chunks.size());
  auto& ch = st.chunks[size_t(in.chunk)];
  auto& cb = chunks_[size_t(in.chunk)];
  // the micro-batch's cache: only the passes and the sends (whose micro-batch is >= 0) read it
  const size_t slot = size_t(in.mb % ch.slots), ring = size_t(in.mb % ch.ring);
  const auto cache = [&]() -> StageCache& { return *cb.acts[slot]; };
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
        if (out->request != MPI_REQUEST_NULL) pipe_.wait(out->request, "send");
      const int m = st.m;
      const SampleBatch<T> micro =
          (*st.batches)[size_t(in.mb / m)].slice(in.mb % m * st.bm, (in.mb % m + 1) * st.bm, st.per_sample);
      timers.start("forward");
      st.loss[in.mb / m] +=
          model_.forward(st.ctx, micro, ch.model_first ? V2<const T>() : V2<const T>(cb.act_in[ring].dev), cache());
      if (st.counts && ch.model_last) correct_[size_t(in.mb / m)] += double(model_.correct(cache()));
      timers.stop("forward", to_string(in));
      break;
    }
    case PipeOp::Backward:
    case PipeOp::BackwardInput: {
      // the backward reuses the cache's output for gradients: its send must have left
      Buffer& sent = cb.act_out[slot];
      if (sent.request != MPI_REQUEST_NULL) pipe_.wait(sent.request, "send");
      const V2<const T> dout = ch.model_last ? V2<const T>() : V2<const T>(cb.grad_in[ring].dev);
      timers.start("backward");
      if (in.op == PipeOp::Backward)
        model_.backward(st.ctx, T(1.0 / st.global_terms), dout, cache());
      else
        model_.backward_input(st.ctx, T(1.0 / st.global_terms), dout, cache());
      timers.stop("backward", to_string(in));
      ch.backward_done[size_t(in.mb)] = 1;  // its received messages are read: the ring buffers are free
      post_receives(st);
      break;
    }
    case PipeOp::BackwardWeight:
      timers.start("backward");
      model_.backward_weight(st.ctx, cache(), {});
      timers.stop("backward", to_string(in));
      break;
    case PipeOp::SendAct:  // tagged with the receiving chunk
      send(model_.output(cache()), cb.act_out[slot], in.peer,
           act_tag(in.mb, message_destination(*st.schedule, stage_, in).second, v));
      break;
    case PipeOp::SendGrad:
      send(model_.input_grad(cache()), cb.grad_out[slot], in.peer,
           grad_tag(in.mb, message_destination(*st.schedule, stage_, in).second, v));
      break;
    default: run_stream_instruction(st, in);
  }
}

// XPipe's instructions: the stage's updates inside the stream, weight prediction, and the
// tied embedding's exchange. Flushing schedules' OptimizerStep is a no-op here (the
// update follows the list).
template <class T>
void PipelineEngine<T>::run_stream_instruction(Run& st, const PipeInstr& in) {
  if (!st.update) return;
  const StreamUpdate<T>& update = *st.update;
  Timers& timers = *st.timers;
  auto& store = model_.params();
  const auto& wte_info = store.infos()[std::max(st.wte, 0)];
  const auto slice = [&](Tensor1<T>& buf) { return V1<T>(buf.data() + wte_info.offset, wte_info.numel); };
  switch (in.op) {
    case PipeOp::OptimizerStep: {  // this stage's update for mini-batch in.mb
      restore_true_weights(st);
      timers.start("optimizer");
      data_.allreduce_sum(store.grads());
      // a non-finite gradient is never applied (the run loop stops or skips the step)
      const double norm = update.step->apply_stage(store, st.first_step + in.mb, model_.tensor_parallel().group,
                                                   st.tied_copy ? st.wte : -1).grad_norm;
      (*st.norms_squared)[in.mb] = norm * norm;
      store.zero_grads();
      ++st.updates;
      if (st.stoppable) st.stop_votes.post(in.mb, update.stop_requested());
      if (update.meter) update.meter->reached(store.params(), st.updates);
      timers.stop("optimizer", to_string(in));
      break;
    }
    case PipeOp::PredictWeights: {
      if (!update.predict) {
        if (update.meter) update.meter->record(store.params(), store.params(), st.updates, in.steps);
        break;
      }
      const std::pair<int, int> ahead{in.steps, st.tied_copy ? in.tied_steps : 0};
      if (st.predicted && ahead == st.predicted_for) {  // the prediction in place is this pass's
      } else if (ahead.first == 0 && ahead.second == 0) {
        restore_true_weights(st);  // the pass runs on the weights the stage holds
      } else {
        restore_true_weights(st);
        std::vector<std::pair<int, Lookahead>> except;
        if (st.tied_copy) except.push_back({st.wte, {in.tied_steps, st.steps_before + st.tied_versions}});
        timers.start("weight_prediction");
        predictor_->predict(store, update.step->lr(st.first_step + st.updates),
                            {in.steps, update.step->adamw().steps_taken()}, except);
        timers.stop("weight_prediction", to_string(in));
        st.predicted = true;
        st.predicted_for = ahead;
      }
      if (update.meter)
        update.meter->record(store.params(), st.predicted ? predictor_->true_weights() : store.params(), st.updates,
                             in.steps);
      break;
    }
    case PipeOp::RestoreWeights:
      // lazily: the next pass often looks as far ahead (nothing updated in between), and
      // whatever changes or sends the true weights restores them first
      break;
    case PipeOp::SendTiedGrad:  // last stage: its share of the embedding's gradient
      send_tied({slice(store.grads())}, tied_grad_tag(in.mb));
      Kokkos::deep_copy(slice(store.grads()), T(0));
      break;
    case PipeOp::RecvTiedGrad:  // first stage: add the last stage's share
      add_into<T>(slice(store.grads()), receive_tied(wte_info.numel, 1, tied_grad_tag(in.mb)));
      break;
    case PipeOp::SendTiedWeights:  // first stage: the new version, with its moments
      restore_true_weights(st);
      send_tied({slice(store.params()), slice(store.adam_m()), slice(store.adam_v())}, tied_weights_tag(in.mb));
      break;
    case PipeOp::RecvTiedWeights: {  // last stage: take the first stage's version
      restore_true_weights(st);
      const int64_t n = wte_info.numel;
      timers.start("pipeline_wait");
      const V1<const T> version = receive_tied(n, 3, tied_weights_tag(in.mb));
      timers.stop("pipeline_wait", to_string(in));
      const auto part = [&](int64_t i) { return Kokkos::subview(version, std::make_pair(i * n, (i + 1) * n)); };
      Kokkos::deep_copy(slice(store.params()), part(0));
      Kokkos::deep_copy(slice(store.adam_m()), part(1));
      Kokkos::deep_copy(slice(store.adam_v()), part(2));
      ++st.tied_versions;
      break;
    }
    default: throw std::logic_error("pipeline: " + to_string(in) + " is not a stream instruction");
  }
}

template <class T>
std::vector<double> PipelineEngine<T>::run(const PipeSchedule& s, const std::vector<SampleBatch<T>>& batches,
                                           int64_t global_batch, const StreamUpdate<T>* update,
                                           std::vector<double>* norms_squared, int64_t first_step, Timers& timers) {
  Run st;
  st.schedule = &s;
  st.program = &s.programs[stage_];
  st.batches = &batches;
  st.update = update;
  st.norms_squared = norms_squared;
  st.timers = &timers;
  st.first_step = first_step;
  st.m = s.micro_batches;
  st.per_sample = model_.targets_per_sample();
  st.bm = batches.front().samples / st.m;
  st.ctx = model_.context(st.bm);
  st.global_terms = double(global_batch) * double(st.per_sample);
  const auto& place = model_.placement();
  st.chunks.resize(size_t(s.virtual_stages));
  std::vector<int> slots;
  for (int c = 0; c < s.virtual_stages; ++c) {
    auto& ch = st.chunks[size_t(c)];
    ch.slots = std::max(1, peak_in_flight(*st.program, c));
    ch.ring = ch.slots + 1;
    ch.model_first = place.model_first(c);
    ch.model_last = place.model_last(c);
    ch.backward_done.assign(size_t(st.m) * size_t(s.mini_batches), 0);
    slots.push_back(ch.slots);
  }
  ensure_buffers(st.ctx, slots);
  auto& store = model_.params();
  store.zero_grads();
  st.first = model_.placement().first();
  st.last = model_.placement().last();
  st.tied_copy = st.last && !st.first;  // holds a copy of the embedding the first stage owns
  st.counts = st.last && model_.counts_correct();
  st.loss.assign(size_t(s.mini_batches), 0.0);
  correct_.assign(size_t(s.mini_batches), 0.0);
  list_receives(st);
  post_receives(st);

  st.wte = model_.tied_index();  // XPipe: the model has one (constructor)
  st.steps_before = update ? update->step->adamw().steps_taken() : 0;
  if (update && !predictor_) {
    predictor_ = std::make_unique<WeightPredictor<T>>(update->step->config());
    predictor_->reserve(store);  // now, not in the middle of the stream
  }
  if (update && update->meter && st.tied_copy) {
    const auto& wte_info = store.infos()[st.wte];
    update->meter->set_skipped(wte_info.offset, wte_info.offset + wte_info.numel);
  }
  st.stoppable = update && update->stop_requested && s.kind == Schedule::XPipe;
  st.lookahead = st.stoppable ? xpipe_stop_lookahead(s) : 0;
  st.stop_votes = StopVotes(stop_comm_, s.mini_batches);
  st.mini_batches = s.mini_batches;
  st.next_end = st.lookahead + 1;  // the next stream length to decide on

  for (size_t at = 0; at < st.program->size(); ++at) {
    if (stop_here(st, (*st.program)[at], at)) {
      --at;  // the same position in the shorter list
      continue;
    }
    run_pass(st, (*st.program)[at]);
  }
  restore_true_weights(st);
  st.stop_votes.finish();  // every rank posted the same
  st.loss.resize(size_t(st.mini_batches));
  if (norms_squared) norms_squared->resize(size_t(st.mini_batches));
  timers.start("pipeline_drain");
  for (auto& cb : chunks_)
    for (auto* list : {&cb.act_out, &cb.grad_out})
      for (auto& b : *list)
        if (b.request != MPI_REQUEST_NULL) pipe_.wait(b.request, "send");
  for (auto& r : tied_out_.requests) embedding_->wait(r, "send");
  tied_out_.requests.clear();
  timers.stop("pipeline_drain");
  return st.loss;
}

template <class T>
BatchResult PipelineEngine<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  if (asynchronous()) throw std::logic_error("PipelineEngine: XPipe runs train_stream(), not forward_backward()");
  const double loss_sum = run(flushing_, {batch}, global_batch, nullptr, nullptr, 0, timers)[0];
  timers.start("grad_allreduce");
  auto& store = model_.params();
  if (embedding_ && model_.tied_index() >= 0) embedding_->allreduce_sum(store.grad(model_.tied_index()));  // its two copies
  sum_gradients(data_, store);  // all of them, or with ZeRO-1 this rank's block
  const BatchResult result = reduce(loss_sum, correct_[0], global_batch);
  timers.stop("grad_allreduce");
  return result;
}

template <class T>
BatchResult PipelineEngine<T>::reduce(double loss_sum, double correct_sum, int64_t global_batch) {
  BatchResult r;
  r.loss = data_.allreduce_sum(pipe_.allreduce_sum(loss_sum)) / (double(global_batch) * double(model_.targets_per_sample()));
  if (model_.counts_correct()) r.correct = int64_t(data_.allreduce_sum(pipe_.allreduce_sum(correct_sum)) + 0.5);
  return r;
}

template <class T>
std::vector<StreamStep> PipelineEngine<T>::train_stream(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                                        int64_t global_batch, const StreamUpdate<T>& update,
                                                        Timers& timers) {
  if (!asynchronous()) throw std::logic_error("PipelineEngine: train_stream() runs XPipe only");
  const int k = int(batches.size());
  const PipeSchedule& s = xpipe_schedule_for(k);
  std::vector<double> norms_squared(size_t(k), 0.0);
  std::vector<double> loss = run(s, batches, global_batch, &update, &norms_squared, first_step, timers);
  const int done = int(loss.size());  // k, or fewer when a stop ended the stream early
  // every stage took part in every update: the losses and norms are complete
  timers.start("grad_allreduce");
  // one device buffer: the losses, then the squared norms
  Tensor1<double> sums("pipeline.stream_sums", 2 * size_t(done));
  auto host = Kokkos::create_mirror_view(sums);
  for (int n = 0; n < done; ++n) {
    host(n) = loss[n];
    host(done + n) = norms_squared[n];
  }
  Kokkos::deep_copy(sums, host);
  pipe_.allreduce_sum(V1<double>(sums));  // each stage's loss share and own norm
  data_.allreduce_sum(Kokkos::subview(sums, std::make_pair(0, done)));  // replicas agree on the norms
  Kokkos::deep_copy(host, sums);
  timers.stop("grad_allreduce");
  std::vector<StreamStep> out(static_cast<size_t>(done));
  for (int n = 0; n < done; ++n)
    out[n] = {host(n) / (double(global_batch) * double(model_.targets_per_sample())), std::sqrt(host(done + n))};
  return out;
}

template <class T>
std::vector<StepOutcome> PipelineEngine<T>::train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                                       int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                                       const std::function<bool()>& stop_requested) {
  if (!asynchronous())
    return TrainEngine<T>::train_steps(first_step, batches, global_batch, update, timers, stop_requested);
  StreamUpdate<T> stream;
  stream.step = &update;
  stream.predict = predict_;
  stream.meter = meter_;
  stream.stop_requested = stop_requested;
  std::vector<StepOutcome> out;
  // each stage applied its update only where its own gradient was finite
  for (const StreamStep& s : train_stream(first_step, batches, global_batch, stream, timers))
    out.push_back({s.loss, s.grad_norm, std::isfinite(s.loss) && std::isfinite(s.grad_norm)});
  return out;
}

template <class T>
BatchResult PipelineEngine<T>::evaluate(const SampleBatch<T>& batch, int64_t global_batch) {
  // forward only, micro-batch after micro-batch: each stage receives, computes, sends on
  const int m = micro_batches_;
  const int64_t t_len = model_.targets_per_sample(), bm = batch.samples / m;
  const BlockContext ctx = model_.context(bm);
  const auto& place = model_.placement();
  const int v = place.chunk_count();
  std::vector<int> slots(static_cast<size_t>(v), 1);
  for (int c = 0; c < v && c < int(chunks_.size()); ++c) slots[size_t(c)] = std::max<int>(1, int(chunks_[size_t(c)].acts.size()));
  ensure_buffers(ctx, slots);
  double loss_sum = 0, correct_sum = 0;
  // the model's parts in order: this stage's chunk c takes stage r - 1's (stage p - 1's
  // chunk c - 1 on the first stage) and hands on to stage r + 1's (the first stage's c + 1)
  const int prev = (stage_ + stages_ - 1) % stages_, next = (stage_ + 1) % stages_;
  for (int mb = 0; mb < m; ++mb)
    for (int c = 0; c < v; ++c) {
      ChunkBuffers& cb = chunks_[size_t(c)];
      StageCache& cache = *cb.acts[0];
      if (!place.model_first(c)) {
        Buffer& in = cb.act_in[0];
        in.request = pipe_.start_recv(in.host.data(), in.host.size(), prev, act_tag(mb, c, v));
        receive_wait(in);
      }
      loss_sum += model_.forward(ctx, batch.slice(mb * bm, (mb + 1) * bm, t_len),
                                 place.model_first(c) ? V2<const T>() : V2<const T>(cb.act_in[0].dev), cache);
      if (place.model_last(c) && model_.counts_correct()) correct_sum += double(model_.correct(cache));
      if (!place.model_last(c)) {
        const int to_chunk = stage_ + 1 < stages_ ? c : c + 1;
        send(model_.output(cache), cb.act_out[0], next, act_tag(mb, to_chunk, v));
        pipe_.wait(cb.act_out[0].request, "send");
      }
    }
  return reduce(loss_sum, correct_sum, global_batch);
}

template <class T>
int64_t PipelineEngine<T>::activation_bytes() const {
  int64_t b = model_.shared_cache_bytes();
  for (const auto& cb : chunks_) {
    for (const auto& a : cb.acts) b += a->bytes();
    for (const auto* list : {&cb.act_in, &cb.grad_in, &cb.act_out, &cb.grad_out})
      for (const auto& m : *list) b += view_bytes(m.dev);  // host mirrors share it on CPUs
  }
  return b;
}

template <class T>
Traffic pipeline_traffic(const StageModel<T>& model, const PipeSchedule& s, int data_ranks, int64_t local_batch,
                         bool zero) {
  const auto& place = model.placement();
  const BlockContext ctx = model.context(local_batch / s.micro_batches);
  const int64_t e = sizeof(T), params = model.params().numel();
  const int64_t tied = model.tied_index() >= 0 ? model.params().infos()[model.tied_index()].numel : 0;
  const auto [rows, cols] = model.boundary_shape(ctx);
  const TensorParallel& tp = model.tensor_parallel();
  const bool stream = s.kind == Schedule::XPipe;
  std::vector<Traffic> micro(static_cast<size_t>(s.virtual_stages));  // per chunk
  for (int c = 0; c < s.virtual_stages; ++c) model.micro_batch_traffic(ctx, micro[size_t(c)], c);
  Traffic out;
  for (const auto& in : s.programs[place.stage]) {
    switch (in.op) {
      case PipeOp::Forward: out.add(micro[size_t(in.chunk)]); break;  // with its backward
      case PipeOp::SendAct:
      case PipeOp::SendGrad: out.add("pipeline", "send", Collective::Send, s.stages, rows * cols * e); break;
      case PipeOp::RecvAct:
      case PipeOp::RecvGrad: out.add("pipeline", "recv", Collective::Send, s.stages, 0); break;
      case PipeOp::OptimizerStep:
        if (!stream) break;
        out.add("data", "allreduce", Collective::AllReduce, data_ranks, params * e);
        if (tp.mode != TensorMode::Serial)  // the stage's gradient norm
          out.add("tensor", "allreduce_scalar", Collective::AllReduce, tp.size(), sizeof(double));
        break;
      case PipeOp::SendTiedGrad: out.add("tied_emb", "send", Collective::Send, 2, tied * e); break;
      case PipeOp::SendTiedWeights: out.add("tied_emb", "send", Collective::Send, 2, tied * e, 3); break;  // and moments
      case PipeOp::RecvTiedGrad: out.add("tied_emb", "recv", Collective::Send, 2, 0); break;
      case PipeOp::RecvTiedWeights: out.add("tied_emb", "recv", Collective::Send, 2, 0, 3); break;
      default: break;
    }
  }
  const int64_t k = s.mini_batches, d = sizeof(double);
  if (stream) {
    out.add("pipeline", "allreduce", Collective::AllReduce, s.stages, 2 * k * d);  // losses and norms
    out.add("data", "allreduce", Collective::AllReduce, data_ranks, k * d);
  } else {
    if (s.stages > 1 && (place.first() || place.last()) && model.tied_index() >= 0)
      out.add("tied_emb", "allreduce", Collective::AllReduce, 2, tied * e);
    gradient_sum_traffic(out, data_ranks, params, e, zero);
    out.add("pipeline", "allreduce_scalar", Collective::AllReduce, s.stages, d);
    out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, d);
  }
  return out;
}

template Traffic pipeline_traffic<float>(const StageModel<float>&, const PipeSchedule&, int, int64_t, bool);
template Traffic pipeline_traffic<double>(const StageModel<double>&, const PipeSchedule&, int, int64_t, bool);
template class PipelineEngine<float>;
template class PipelineEngine<double>;

}  // namespace strata
