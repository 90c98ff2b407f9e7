#include "engine/pipeline/pipeline_engine.hpp"

#include <cmath>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "core/error.hpp"
#include "engine/pipeline/simulate.hpp"
#include "optim/grad_clip.hpp"

namespace strata {
namespace {
// Messages of one kind between two stages arrive in order, so tags only guard the
// pairing; they wrap well inside MPI's guaranteed tag range (32767).
constexpr int act_tag(int mb) { return 2 * (mb % 16000); }
constexpr int grad_tag(int mb) { return 2 * (mb % 16000) + 1; }
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
    flushing_ = make_schedule(schedule, stages_, micro_batches_);
    const PipeSimulation sim = simulate_schedule(flushing_);
    if (sim.deadlock) throw std::logic_error("pipeline schedule deadlocks: " + sim.deadlock_report);
  }
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
void PipelineEngine<T>::ensure_buffers(const BlockContext& ctx, int slots) {
  const auto [rows, cols] = model_.boundary_shape(ctx);
  // at least `slots`: the buffers only grow, so that XPipe streams of different lengths
  // (a one-step stream keeps fewer micro-batches in flight) do not reallocate them in turn
  const bool same_shape = !act_in_.empty() && int64_t(act_in_[0].dev.extent(0)) == rows;
  if (same_shape && int(acts_.size()) >= slots) return;
  if (same_shape) slots = std::max(slots, int(acts_.size()));
  acts_.clear();
  for (int i = 0; i < slots; ++i) acts_.push_back(model_.make_cache());
  for (auto* list : {&act_in_, &grad_in_, &act_out_, &grad_out_}) {
    list->assign(list == &act_in_ || list == &grad_in_ ? slots + 1 : slots, Buffer{});
    for (auto& b : *list) {
      b.dev = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "pipeline.message"), rows, cols);
      b.host = Kokkos::create_mirror_view(b.dev);
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

// Which receives have been posted, and when a ring buffer is free for the next one.
template <class T>
struct PipelineEngine<T>::Run {
  std::vector<const PipeInstr*> act_recvs, grad_recvs;  // in program order
  size_t act_posted = 0, grad_posted = 0;
  std::vector<char> backward_done;  // per micro-batch
  int ring = 1;
  bool free_for(int mb) const { return mb < ring || backward_done[mb - ring]; }
};

template <class T>
std::vector<double> PipelineEngine<T>::run(const PipeSchedule& s, const std::vector<SampleBatch<T>>& batches,
                                           int64_t global_batch, const StreamUpdate<T>* update,
                                           std::vector<double>* norms_squared, int64_t first_step, Timers& timers) {
  const int m = s.micro_batches;
  const int64_t t_len = model_.targets_per_sample(), bm = batches.front().samples / m;
  const BlockContext ctx = model_.context(bm);
  const double global_tokens = double(global_batch) * double(t_len);
  const int slots = std::max(1, simulate_schedule(s).peak_in_flight[stage_]);
  ensure_buffers(ctx, slots);
  auto& store = model_.params();
  store.zero_grads();
  const StageProgram* program = &s.programs[stage_];  // a stopped XPipe stream switches to a shorter list
  const bool first = model_.placement().first(), last = model_.placement().last();
  const bool tied_copy = last && !first;  // holds a copy of the embedding the first stage owns

  Run st;
  st.ring = slots + 1;
  st.backward_done.assign(size_t(m) * size_t(s.mini_batches), 0);
  for (const auto& in : *program) {
    if (in.op == PipeOp::RecvAct) st.act_recvs.push_back(&in);
    if (in.op == PipeOp::RecvGrad) st.grad_recvs.push_back(&in);
  }
  const auto post_receives = [&] {
    for (; st.act_posted < st.act_recvs.size() && st.free_for(st.act_recvs[st.act_posted]->mb); ++st.act_posted) {
      const PipeInstr& in = *st.act_recvs[st.act_posted];
      Buffer& b = act_in_[in.mb % st.ring];
      b.request = pipe_.start_recv(b.host.data(), b.host.size(), in.peer, act_tag(in.mb));
    }
    for (; st.grad_posted < st.grad_recvs.size() && st.free_for(st.grad_recvs[st.grad_posted]->mb); ++st.grad_posted) {
      const PipeInstr& in = *st.grad_recvs[st.grad_posted];
      Buffer& b = grad_in_[in.mb % st.ring];
      b.request = pipe_.start_recv(b.host.data(), b.host.size(), in.peer, grad_tag(in.mb));
    }
  };
  post_receives();

  // XPipe state: the stage's updates in this stream, and the tied embedding's version
  const int wte = model_.tied_index();  // XPipe: the model has one (constructor)
  const auto& wte_info = store.infos()[std::max(wte, 0)];
  const auto slice = [&](Tensor1<T>& buf) { return V1<T>(buf.data() + wte_info.offset, wte_info.numel); };
  const int64_t steps_before = update ? update->step->adamw().steps_taken() : 0;
  int64_t updates = 0, tied_versions = 0;
  if (update && !predictor_) {
    predictor_ = std::make_unique<WeightPredictor<T>>(update->step->config());
    predictor_->reserve(store);  // now, not in the middle of the stream
  }
  WeightPredictor<T>* predictor = predictor_.get();
  bool predicted = false;               // the store holds predicted weights
  std::pair<int, int> predicted_for{0, 0};  // (steps, tied steps) of that prediction
  const auto restore_true_weights = [&] {
    if (!predicted) return;
    timers.start("weight_prediction");
    predictor->restore(store);
    timers.stop("weight_prediction", "RESTORE");
    predicted = false;
  };
  if (update && update->meter && tied_copy) update->meter->set_skipped(wte_info.offset, wte_info.offset + wte_info.numel);

  std::vector<double> loss(size_t(s.mini_batches), 0.0);
  correct_.assign(size_t(s.mini_batches), 0.0);
  const bool counts = last && model_.counts_correct();
  const auto slot = [&](int mb) { return mb % slots; };

  // XPipe's early end: each update posts this rank's stop request in a non-blocking
  // all-reduce over the job; before the forward pass where the list of a stream ending
  // after mini-batch k' - 1 departs from this one, the request of update k' - 1 - L is
  // read (schedule.hpp), and if any rank asked, this rank switches to that list.
  const bool stoppable = update && update->stop_requested && s.kind == Schedule::XPipe;
  const int lookahead = stoppable ? xpipe_stop_lookahead(s) : 0;
  std::vector<int> stop_flags(size_t(s.mini_batches), 0);
  std::vector<MPI_Request> stop_requests(size_t(s.mini_batches), MPI_REQUEST_NULL);
  int mini_batches = s.mini_batches, next_end = lookahead + 1;  // the next stream length to decide on
  const auto end_early = [&](int k_end, size_t at) {
    const StageProgram& shorter = xpipe_schedule_for(k_end).programs[stage_];
    for (size_t j = 0; j < at; ++j)
      if (shorter[j].op != (*program)[j].op || shorter[j].mb != (*program)[j].mb)
        throw std::logic_error("XPipe: the list of a " + std::to_string(k_end) + "-step stream departs before " +
                               to_string((*program)[at]));
    // receives posted for micro-batches the shorter stream does not have are cancelled
    const int end_mb = k_end * m;
    for (auto [list, posted, ring] : {std::make_tuple(&st.act_recvs, &st.act_posted, &act_in_),
                                      std::make_tuple(&st.grad_recvs, &st.grad_posted, &grad_in_)}) {
      size_t kept = 0;
      for (size_t j = 0; j < *posted; ++j) {
        if ((*list)[j]->mb < end_mb) {
          ++kept;
          continue;
        }
        MPI_Request& r = (*ring)[(*list)[j]->mb % st.ring].request;
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
      *posted = kept;
      list->clear();
      for (const auto& in : shorter)
        if (in.op == (list == &st.act_recvs ? PipeOp::RecvAct : PipeOp::RecvGrad)) list->push_back(&in);
    }
    program = &shorter;
    mini_batches = k_end;
  };

  for (size_t at = 0; at < program->size(); ++at) {
    const PipeInstr& in = (*program)[at];
    if (stoppable && next_end < mini_batches && in.mb == next_end * m - 1 &&
        (in.op == PipeOp::RecvAct || in.op == PipeOp::PredictWeights || in.op == PipeOp::Forward)) {
      MPI_Request& r = stop_requests[size_t(next_end - 1 - lookahead)];
      timers.start("stop_agreement");
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      timers.stop("stop_agreement");
      if (stop_flags[size_t(next_end - 1 - lookahead)]) {
        end_early(next_end, at);
        --at;  // the same position in the shorter list
        continue;
      }
      ++next_end;
    }
    switch (in.op) {
      case PipeOp::RecvAct:
      case PipeOp::RecvGrad: {
        const size_t posted = in.op == PipeOp::RecvAct ? st.act_posted : st.grad_posted;
        const auto& list = in.op == PipeOp::RecvAct ? st.act_recvs : st.grad_recvs;
        if (posted == 0 || list[posted - 1]->mb < in.mb)
          throw std::logic_error("pipeline: " + to_string(in) + " was not posted (ring too small)");
        timers.start("pipeline_wait");  // the bubble, as seen from this stage
        receive_wait(in.op == PipeOp::RecvAct ? act_in_[in.mb % st.ring] : grad_in_[in.mb % st.ring]);
        timers.stop("pipeline_wait", to_string(in));
        break;
      }
      case PipeOp::Forward: {
        // the slot's previous micro-batch has finished its backward; its sends must be done
        for (auto* out : {&act_out_[slot(in.mb)], &grad_out_[slot(in.mb)]})
          if (out->request != MPI_REQUEST_NULL) pipe_.wait(out->request, "send");
        const SampleBatch<T> micro = batches[size_t(in.mb / m)].slice(in.mb % m * bm, (in.mb % m + 1) * bm, t_len);
        timers.start("forward");
        loss[in.mb / m] += model_.forward(ctx, micro, first ? V2<const T>() : V2<const T>(act_in_[in.mb % st.ring].dev),
                                          *acts_[slot(in.mb)]);
        if (counts) correct_[size_t(in.mb / m)] += double(model_.correct(*acts_[slot(in.mb)]));
        timers.stop("forward", to_string(in));
        break;
      }
      case PipeOp::Backward:
        timers.start("backward");
        model_.backward(ctx, T(1.0 / global_tokens), last ? V2<const T>() : V2<const T>(grad_in_[in.mb % st.ring].dev),
                        *acts_[slot(in.mb)]);
        timers.stop("backward", to_string(in));
        st.backward_done[in.mb] = 1;
        post_receives();
        break;
      case PipeOp::SendAct:
        send(model_.output(*acts_[slot(in.mb)]), act_out_[slot(in.mb)], in.peer, act_tag(in.mb));
        break;
      case PipeOp::SendGrad: send(model_.input_grad(*acts_[slot(in.mb)]), grad_out_[slot(in.mb)], in.peer, grad_tag(in.mb)); break;
      case PipeOp::OptimizerStep: {
        if (!update) break;  // flushing schedules: the trainer updates after the list
        // XPipe: this stage's update for mini-batch in.mb, in the stream
        restore_true_weights();
        timers.start("optimizer");
        data_.allreduce_sum(store.grads());
        // a non-finite gradient is never applied (the run loop stops or skips the step)
        const double norm = update->step->apply_stage(store, first_step + in.mb, model_.tensor_parallel().group,
                                                      tied_copy ? wte : -1).grad_norm;
        (*norms_squared)[in.mb] = norm * norm;
        store.zero_grads();
        ++updates;
        if (stoppable) {
          int& flag = stop_flags[size_t(in.mb)];
          flag = update->stop_requested() ? 1 : 0;
          MPI_Iallreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, stop_comm_, &stop_requests[size_t(in.mb)]);
        }
        if (update->meter) update->meter->reached(store.params(), updates);
        timers.stop("optimizer", to_string(in));
        break;
      }
      case PipeOp::PredictWeights: {
        if (!update->predict) {
          if (update->meter) update->meter->record(store.params(), store.params(), updates, in.steps);
          break;
        }
        const std::pair<int, int> ahead{in.steps, tied_copy ? in.tied_steps : 0};
        if (predicted && ahead == predicted_for) {  // the prediction in place is this pass's
        } else if (ahead.first == 0 && ahead.second == 0) {
          restore_true_weights();  // the pass runs on the weights the stage holds
        } else {
          restore_true_weights();
          std::vector<std::pair<int, Lookahead>> except;
          if (tied_copy) except.push_back({wte, {in.tied_steps, steps_before + tied_versions}});
          timers.start("weight_prediction");
          predictor->predict(store, update->step->lr(first_step + updates),
                             {in.steps, update->step->adamw().steps_taken()}, except);
          timers.stop("weight_prediction", to_string(in));
          predicted = true;
          predicted_for = ahead;
        }
        if (update->meter)
          update->meter->record(store.params(), predicted ? predictor->true_weights() : store.params(), updates, in.steps);
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
        restore_true_weights();
        send_tied({slice(store.params()), slice(store.adam_m()), slice(store.adam_v())}, tied_weights_tag(in.mb));
        break;
      case PipeOp::RecvTiedWeights: {  // last stage: take the first stage's version
        restore_true_weights();
        const int64_t n = wte_info.numel;
        timers.start("pipeline_wait");
        const V1<const T> version = receive_tied(n, 3, tied_weights_tag(in.mb));
        timers.stop("pipeline_wait", to_string(in));
        const auto part = [&](int64_t i) { return Kokkos::subview(version, std::make_pair(i * n, (i + 1) * n)); };
        Kokkos::deep_copy(slice(store.params()), part(0));
        Kokkos::deep_copy(slice(store.adam_m()), part(1));
        Kokkos::deep_copy(slice(store.adam_v()), part(2));
        ++tied_versions;
        break;
      }
    }
  }
  restore_true_weights();
  MPI_Waitall(int(stop_requests.size()), stop_requests.data(), MPI_STATUSES_IGNORE);  // every rank posted the same
  loss.resize(size_t(mini_batches));
  if (norms_squared) norms_squared->resize(size_t(mini_batches));
  timers.start("pipeline_drain");
  for (auto* list : {&act_out_, &grad_out_})
    for (auto& b : *list)
      if (b.request != MPI_REQUEST_NULL) pipe_.wait(b.request, "send");
  for (auto& r : tied_out_.requests) embedding_->wait(r, "send");
  tied_out_.requests.clear();
  timers.stop("pipeline_drain");
  return loss;
}

template <class T>
BatchResult PipelineEngine<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  if (asynchronous()) throw std::logic_error("PipelineEngine: XPipe runs train_stream(), not forward_backward()");
  const double loss_sum = run(flushing_, {batch}, global_batch, nullptr, nullptr, 0, timers)[0];
  timers.start("grad_allreduce");
  auto& store = model_.params();
  if (embedding_ && model_.tied_index() >= 0) embedding_->allreduce_sum(store.grad(model_.tied_index()));  // its two copies
  data_.allreduce_sum(store.grads());
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
  ensure_buffers(ctx, std::max<int>(1, int(acts_.size())));
  const auto& place = model_.placement();
  double loss_sum = 0, correct_sum = 0;
  for (int mb = 0; mb < m; ++mb) {
    if (!place.first()) {
      act_in_[0].request = pipe_.start_recv(act_in_[0].host.data(), act_in_[0].host.size(), stage_ - 1, act_tag(mb));
      receive_wait(act_in_[0]);
    }
    loss_sum += model_.forward(ctx, batch.slice(mb * bm, (mb + 1) * bm, t_len),
                               place.first() ? V2<const T>() : V2<const T>(act_in_[0].dev), *acts_[0]);
    if (place.last() && model_.counts_correct()) correct_sum += double(model_.correct(*acts_[0]));
    if (!place.last()) {
      send(model_.output(*acts_[0]), act_out_[0], stage_ + 1, act_tag(mb));
      pipe_.wait(act_out_[0].request, "send");
    }
  }
  return reduce(loss_sum, correct_sum, global_batch);
}

template <class T>
int64_t PipelineEngine<T>::activation_bytes() const {
  int64_t b = 0;
  for (const auto& a : acts_) b += a->bytes();
  for (const auto* list : {&act_in_, &grad_in_, &act_out_, &grad_out_})
    for (const auto& m : *list) b += view_bytes(m.dev);  // host mirrors share it on CPUs
  return b;
}

template <class T>
Traffic pipeline_traffic(const StageModel<T>& model, const PipeSchedule& s, int data_ranks, int64_t local_batch) {
  const auto& place = model.placement();
  const BlockContext ctx = model.context(local_batch / s.micro_batches);
  const int64_t e = sizeof(T), params = model.params().numel();
  const int64_t tied = model.tied_index() >= 0 ? model.params().infos()[model.tied_index()].numel : 0;
  const auto [rows, cols] = model.boundary_shape(ctx);
  const TensorParallel& tp = model.tensor_parallel();
  const bool stream = s.kind == Schedule::XPipe;
  Traffic micro, out;
  model.micro_batch_traffic(ctx, micro);
  for (const auto& in : s.programs[place.stage]) {
    switch (in.op) {
      case PipeOp::Forward: out.add(micro); break;  // with its backward
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
    out.add("data", "allreduce", Collective::AllReduce, data_ranks, params * e);
    out.add("pipeline", "allreduce_scalar", Collective::AllReduce, s.stages, d);
    out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, d);
  }
  return out;
}

template Traffic pipeline_traffic<float>(const StageModel<float>&, const PipeSchedule&, int, int64_t);
template Traffic pipeline_traffic<double>(const StageModel<double>&, const PipeSchedule&, int, int64_t);
template class PipelineEngine<float>;
template class PipelineEngine<double>;

}  // namespace strata
