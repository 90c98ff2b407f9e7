#include "engine/pipeline/xpipe_engine.hpp"

#include "optim/zero_sharding.hpp"

#include <cmath>

#include <stdexcept>
#include <string>

#include "comm/control.hpp"
#include "core/error.hpp"
#include "engine/pipeline/simulate.hpp"

namespace strata {
namespace {
// One message of each kind per mini-batch, in order; the tags only guard the pairing.
constexpr int tied_grad_tag(int n) { return 2 * (n % 16000); }
constexpr int tied_weights_tag(int n) { return 2 * (n % 16000) + 1; }

template <class T>
void add_into(V1<T> y, V1<const T> x) {  // y += x
  Kokkos::parallel_for(
      "xpipe_add", Range(0, y.extent(0)), KOKKOS_LAMBDA(const int64_t i) { y(i) += x(i); });
}
}  // namespace

// The hooks of one stream: the stage's updates, the weights' versions, the tied
// embedding's messages and the in-stream stop agreement.
template <class T>
class XPipeEngine<T>::Stream : public ListHooks {
 public:
  Stream(XPipeEngine& engine, const PipeSchedule& s, const StreamUpdate<T>& update, int64_t first_step, Timers& timers)
      : e_(engine), update_(update), timers_(timers), first_step_(first_step), m_(s.micro_batches),
        mini_batches_(s.mini_batches), norms_squared_(size_t(s.mini_batches), 0.0) {
    const auto& place = e_.model_.placement();
    tied_copy_ = place.last() && !place.first();  // holds a copy of the embedding the first stage owns
    wte_ = e_.model_.params().table().tied_index();
    steps_before_ = update.step->adamw().steps_taken();
    stoppable_ = bool(update.stop_requested);
    lookahead_ = stoppable_ ? xpipe_stop_lookahead(s) : 0;
    next_end_ = lookahead_ + 1;  // the next stream length to decide on
    stop_votes_ = StopVotes(e_.stop_comm_, s.mini_batches);
    if (!e_.predictor_) {
      e_.predictor_ = std::make_unique<WeightPredictor<T>>(update.step->config());
      e_.predictor_->reserve(e_.model_.params());  // now, not in the middle of the stream
    }
    if (update.meter && tied_copy_) {
      const auto& wte = e_.model_.params().infos()[size_t(wte_)];
      update.meter->set_skipped(wte.offset, wte.offset + wte.numel);
    }
  }

  // Ends the stream: the true weights back in place, every rank's votes complete.
  void finish() {
    restore_true_weights();
    stop_votes_.finish();  // every rank posted the same
  }
  int mini_batches() const { return mini_batches_; }
  const std::vector<double>& norms_squared() const { return norms_squared_; }

  // A stop: each update posts this rank's stop request in a non-blocking all-reduce over
  // the job; before the forward pass where the list of a stream ending after mini-batch
  // k' - 1 departs from this one, the request of update k' - 1 - L is read (schedule.hpp),
  // and if any rank asked, the stage continues in that list.
  const StageProgram* switch_before(const PipeInstr& in, size_t) override {
    if (!stoppable_ || next_end_ >= mini_batches_ || in.mb != next_end_ * m_ - 1 ||
        !(in.op == PipeOp::RecvAct || in.op == PipeOp::PredictWeights || in.op == PipeOp::Forward))
      return nullptr;
    timers_.start("stop_agreement");
    const bool stop = stop_votes_.result(next_end_ - 1 - lookahead_);
    timers_.stop("stop_agreement");
    if (!stop) {
      ++next_end_;
      return nullptr;
    }
    mini_batches_ = next_end_;
    return &e_.schedule_for(next_end_).programs[size_t(e_.model_.placement().stage)];
  }

  void run(const PipeInstr& in) override {
    auto& store = e_.model_.params();
    const auto& wte_info = store.infos()[size_t(std::max(wte_, 0))];
    const auto slice = [&](Tensor1<T>& buf) { return V1<T>(buf.data() + wte_info.offset, wte_info.numel); };
    switch (in.op) {
      case PipeOp::OptimizerStep: {  // this stage's update for mini-batch in.mb
        restore_true_weights();
        timers_.start("optimizer");
        sum_gradients(e_.data_, e_.expert_data_, store);  // the experts' over their replicas
        // a non-finite gradient is never applied (the run loop stops or skips the step)
        const double norm =
            update_.step
                ->apply_stage(store, first_step_ + in.mb, e_.model_.tensor_parallel().group(), tied_copy_ ? wte_ : -1)
                .grad_norm;
        norms_squared_[size_t(in.mb)] = norm * norm;
        store.zero_grads();
        ++updates_;
        if (stoppable_) stop_votes_.post(in.mb, update_.stop_requested());
        if (update_.meter) update_.meter->reached(store.params(), updates_);
        timers_.stop("optimizer", to_string(in));
        break;
      }
      case PipeOp::PredictWeights:
        predict(in);
        break;
      case PipeOp::RestoreWeights:
        // lazily: the next pass often looks as far ahead (nothing updated in between), and
        // whatever changes or sends the true weights restores them first
        break;
      case PipeOp::SendTiedGrad:  // last stage: its share of the embedding's gradient
        e_.send_tied({slice(store.grads())}, tied_grad_tag(in.mb));
        Kokkos::deep_copy(slice(store.grads()), T(0));
        break;
      case PipeOp::RecvTiedGrad:  // first stage: add the last stage's share
        add_into<T>(slice(store.grads()), e_.receive_tied(wte_info.numel, 1, tied_grad_tag(in.mb)));
        break;
      case PipeOp::SendTiedWeights:  // first stage: the new version, with its moments
        restore_true_weights();
        e_.send_tied({slice(store.params()), slice(store.zero().adam_m()), slice(store.zero().adam_v())},
                     tied_weights_tag(in.mb));
        break;
      case PipeOp::RecvTiedWeights: {  // last stage: take the first stage's version
        restore_true_weights();
        const int64_t n = wte_info.numel;
        timers_.start("pipeline_wait");
        const V1<const T> version = e_.receive_tied(n, 3, tied_weights_tag(in.mb));
        timers_.stop("pipeline_wait", to_string(in));
        const auto part = [&](int64_t i) { return Kokkos::subview(version, std::make_pair(i * n, (i + 1) * n)); };
        Kokkos::deep_copy(slice(store.params()), part(0));
        Kokkos::deep_copy(slice(store.zero().adam_m()), part(1));
        Kokkos::deep_copy(slice(store.zero().adam_v()), part(2));
        ++tied_versions_;
        break;
      }
      default:
        throw std::logic_error("XPipe: " + to_string(in) + " is not a stream instruction");
    }
  }

 private:
  void predict(const PipeInstr& in) {
    auto& store = e_.model_.params();
    if (!update_.predict) {
      if (update_.meter) update_.meter->record(store.params(), store.params(), updates_, in.steps);
      return;
    }
    const std::pair<int, int> ahead{in.steps, tied_copy_ ? in.tied_steps : 0};
    if (predicted_ && ahead == predicted_for_) {  // the prediction in place is this pass's
    } else if (ahead.first == 0 && ahead.second == 0) {
      restore_true_weights();  // the pass runs on the weights the stage holds
    } else {
      restore_true_weights();
      std::vector<std::pair<int, Lookahead>> except;
      if (tied_copy_) except.push_back({wte_, {in.tied_steps, steps_before_ + tied_versions_}});
      timers_.start("weight_prediction");
      e_.predictor_->predict(store, update_.step->lr(first_step_ + updates_),
                             {in.steps, update_.step->adamw().steps_taken()}, except);
      timers_.stop("weight_prediction", to_string(in));
      predicted_ = true;
      predicted_for_ = ahead;
    }
    if (update_.meter)
      update_.meter->record(store.params(), predicted_ ? e_.predictor_->true_weights() : store.params(), updates_,
                            in.steps);
  }

  void restore_true_weights() {
    if (!predicted_) return;
    timers_.start("weight_prediction");
    e_.predictor_->restore(e_.model_.params());
    timers_.stop("weight_prediction", "RESTORE");
    predicted_ = false;
  }

  XPipeEngine& e_;
  const StreamUpdate<T>& update_;
  Timers& timers_;
  int64_t first_step_ = 0;
  int m_ = 1, mini_batches_ = 1;
  std::vector<double> norms_squared_;  // per mini-batch: this stage's gradient norm, squared
  bool tied_copy_ = false;
  int wte_ = -1;
  int64_t steps_before_ = 0, updates_ = 0, tied_versions_ = 0;
  bool predicted_ = false;                   // the store holds predicted weights
  std::pair<int, int> predicted_for_{0, 0};  // (steps, tied steps) of that prediction
  bool stoppable_ = false;
  int lookahead_ = 0, next_end_ = 1;
  StopVotes stop_votes_;  // one per update, posted over Grid::control
};

template <class T>
XPipeEngine<T>::XPipeEngine(StageModel<T>& model, const Grid& grid, int micro_batches, bool predict,
                            StalenessMeter<T>* meter)
    : Engine(model, grid, forward_only_schedule(int(grid.shape().pipeline), micro_batches)),
      expert_data_(grid.expert_replicas()), pipe_(grid.pipeline()), embedding_(grid.embedding()),
      stop_comm_(grid.control()), micro_batches_(micro_batches), stages_(int(grid.shape().pipeline)), predict_(predict),
      meter_(meter) {
  if (stages_ > 1 && model_.params().table().tied_index() < 0)
    throw UserError("parallel.schedule = \"xpipe\" runs models with a tied embedding (the GPT); use gpipe or 1f1b");
  // the lists of every stream length share the property (a stream's first list decides)
  model_.share_loss_layer_cache(stages_ > 1 &&
                                one_forward_at_a_time(schedule_for(1).programs[size_t(model.placement().stage)]));
}

template <class T>
XPipeEngine<T>::~XPipeEngine() = default;

template <class T>
const PipeSchedule& XPipeEngine<T>::schedule_for(int mini_batches) {
  auto it = lists_.find(mini_batches);
  if (it != lists_.end()) return it->second;
  PipeSchedule s = make_schedule(Schedule::XPipe, stages_, micro_batches_, mini_batches);
  const PipeSimulation sim = simulate_schedule(s);
  if (sim.deadlock) throw std::logic_error("XPipe schedule deadlocks: " + sim.deadlock_report);
  return lists_.emplace(mini_batches, std::move(s)).first->second;  // a map: earlier lists stay in place
}

template <class T>
void XPipeEngine<T>::send_tied(const std::vector<V1<const T>>& parts, int tag) {
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
V1<const T> XPipeEngine<T>::receive_tied(int64_t n, int parts, int tag) {
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
void XPipeEngine<T>::TiedMessage::resize(int64_t n) {
  if (int64_t(dev.extent(0)) == n) return;
  dev = Tensor1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "xpipe.tied_message"), n);
  host = Kokkos::create_mirror_view(dev);
}

template <class T>
std::vector<StreamStep> XPipeEngine<T>::train_stream(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                                     int64_t global_batch, const StreamUpdate<T>& update,
                                                     Timers& timers) {
  const PipeSchedule& s = schedule_for(int(batches.size()));
  model_.params().zero_grads();
  Stream stream(*this, s, update, first_step, timers);
  const ListSums sums = executor_.run(s, batches, global_batch, timers, &stream);
  stream.finish();
  timers.start("pipeline_drain");
  for (auto& r : tied_out_.requests) embedding_->wait(r, "send");
  tied_out_.requests.clear();
  timers.stop("pipeline_drain");
  const int done = stream.mini_batches();  // the list's, or fewer when a stop ended the stream early
  // every stage took part in every update: the losses and norms are complete
  timers.start("grad_allreduce");
  // one device buffer: the losses, then the squared norms
  Tensor1<double> totals("xpipe.stream_sums", 2 * size_t(done));
  auto host = Kokkos::create_mirror_view(totals);
  for (int n = 0; n < done; ++n) {
    host(n) = sums.loss[size_t(n)];
    host(done + n) = stream.norms_squared()[size_t(n)];
  }
  Kokkos::deep_copy(totals, host);
  pipe_.allreduce_sum(V1<double>(totals));                                // each stage's loss share and own norm
  data_.allreduce_sum(Kokkos::subview(totals, std::make_pair(0, done)));  // replicas agree on the norms
  Kokkos::deep_copy(host, totals);
  timers.stop("grad_allreduce");
  std::vector<StreamStep> out(static_cast<size_t>(done));
  for (int n = 0; n < done; ++n)
    out[size_t(n)] = {host(n) / (double(global_batch) * double(model_.targets_per_sample())),
                      std::sqrt(host(done + n))};
  return out;
}

template <class T>
std::vector<StepOutcome> XPipeEngine<T>::train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                                     int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                                     const std::function<bool()>& stop_requested) {
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

template class XPipeEngine<float>;
template class XPipeEngine<double>;

}  // namespace strata
