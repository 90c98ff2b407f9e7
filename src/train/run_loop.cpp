#include "train/run_loop.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/initial_weights.hpp"
#include "checkpoint/restart_point.hpp"
#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "io/trace_file.hpp"
#include "model/model_kind.hpp"
#include "train/resume.hpp"
#include "train/stop_signals.hpp"
#include "train/stop_watchdog.hpp"

namespace strata {
namespace {

// Every timer any rank has, with its largest time and call count over the ranks. Ranks
// need not have the same timers (an XPipe stage that never predicts has no
// weight_prediction timer), so the names are agreed on before the values are reduced.
std::map<std::string, Timers::Entry> max_over_ranks(const Timers& timers, MPI_Comm comm) {
  std::string mine;
  for (const auto& [name, e] : timers.entries()) mine += name + '\n';
  std::map<std::string, Timers::Entry> out;
  for (const std::string& all : allgather_strings(comm, mine))
    for (size_t begin = 0, end; (end = all.find('\n', begin)) != std::string::npos; begin = end + 1)
      out[all.substr(begin, end - begin)] = {};
  std::vector<double> values;  // seconds and calls, in the union's order
  for (const auto& [name, unused] : out) {
    const auto it = timers.entries().find(name);
    values.push_back(it == timers.entries().end() ? 0.0 : it->second.seconds);
    values.push_back(it == timers.entries().end() ? 0.0 : double(it->second.calls));
  }
  max_over(comm, values);
  size_t k = 0;
  for (auto& [name, e] : out) {
    e.seconds = values[k++];
    e.calls = int64_t(values[k++]);
  }
  return out;
}

std::string hms(double s) {
  const int64_t t = int64_t(s + 0.5);
  return strfmt("%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
}

}  // namespace

RunLoop::RunLoop(const Deck& deck, const TrainOptions& opts, TrainSteps& job, StopWatchdog* watchdog)
    : deck_(deck), opts_(opts), job_(job), watchdog_(watchdog), log_(opts.job.print ? job.grid().world_rank() : -1) {
  rank_ = job_.grid().world_rank();
  if (opts_.write_outputs) run_dir_ = deck_.run.out_dir + "/" + deck_.run.name;
}

void RunLoop::set_up() {
  const MPI_Comm world = job_.grid().world();
  // 1. the run directory and its lock (rank 0); an unwritable trace file stops the run
  // before it trains, not after
  agreed(world, [&] {
    if (!opts_.trace.empty() && rank_ == 0 && !std::ofstream(opts_.trace))
      throw UserError("cannot write the trace file '" + opts_.trace + "'");
    if (rank_ != 0 || run_dir_.empty()) return;
    make_directories(run_dir_);
    lock_ = std::make_unique<RunLock>(run_dir_);
  });
  // 2. where to start, decided by rank 0; every rank reads its part of the checkpoint
  const RestartPoint from = choose_restart_point(opts_.restart, opts_.fresh, run_dir_, job_.params(), world);
  if (!from.note.empty()) log_.info("strata: restart: " + from.note);
  agreed(world, [&] {
    if (!from.path.empty()) start_ = resume_from_checkpoint(from.path, job_, deck_, log_);
  });
  // a fresh run from weights made elsewhere (model.init_from; a restart has its own)
  agreed(world, [&] {
    if (!from.path.empty() || deck_.model.init_from.empty()) return;
    const double t0 = Timers::now();
    start_.init_from = load_initial_weights(deck_.model.init_from, deck_.model, job_.params());
    const double dt = Timers::now() - t0;
    log_.info(strfmt("strata: init_from: %.3f s to read %s; the optimizer starts fresh", dt, start_.init_from.c_str()));
  });
  // 3. the outputs (rank 0): deck.toml, metrics.csv, the checkpoints folder
  agreed(world, [&] {
    stage_times_ = StageTimes::for_run(job_.grid(), run_dir_, start_.step,
                                       deck_.parallel.micro_batches);  // (rank 0 opens stages.csv)
    if (run_dir_.empty()) return;
    publisher_ =
        std::make_unique<CheckpointPublisher>(run_dir_ + "/checkpoints", world, deck_.run.keep_checkpoints, from.path);
    if (rank_ != 0) return;
    make_directories(run_dir_ + "/checkpoints");
    std::ofstream out(run_dir_ + "/deck.toml");
    out << deck_.resolved_toml;
    out.close();
    if (!out) throw IoError("cannot write " + run_dir_ + "/deck.toml");
    auto columns = job_.metrics().columns();
    columns.insert(columns.begin(), {"step", "loss"});
    columns.push_back("skipped_steps");
    metrics_ = std::make_unique<MetricsCsv>(run_dir_ + "/metrics.csv", columns, start_.step > 0 ? start_.step : -1);
  });
}

RunLoop::~RunLoop() = default;

int64_t RunLoop::round_end(int64_t step) const {
  const auto& rc = deck_.run;
  const auto divides = [](int64_t every, int64_t n) { return every > 0 && n % every == 0; };
  int64_t end = step;
  while (end - step + 1 < job_.facts().max_round_steps &&
         !(end + 1 == rc.steps || end == 0 || divides(rc.log_every, end + 1) || divides(rc.val_every, end + 1) ||
           (!run_dir_.empty() && divides(rc.checkpoint_every, end + 1))))
    ++end;
  return end;
}

TrainState RunLoop::checkpoint_state(int64_t steps_done, int64_t optim_steps, double val) const {
  TrainState s;
  s.step = steps_done;
  s.optim_steps = optim_steps;
  s.tokens_seen = steps_done * job_.facts().samples_per_step;
  s.val_loss = val;
  s.tokenizer = job_.facts().tokenizer_model;
  s.init_from = start_.init_from;
  s.engine = job_.engine_state();
  if (const AcrossCodec* codec = job_.grid().across_codec()) {
    s.codec_place = job_.grid().across_codec_place(job_.facts().layout);
    s.codec_state = codec->state();
  }
  return s;
}

struct RunLoop::Window {
  double t_start = 0;  // the loop's
  double start = 0;    // the window's, moved past validation and checkpoints
  int64_t steps = 0, skipped = 0, skipped_in_a_row = 0;
  int64_t correct = 0;             // classifiers: training samples predicted right
  std::pair<double, double> comm;  // the job's (seconds, wire bytes) at the window's start
  std::string output_failure;      // rank 0: metrics.csv could not be written
  // moves the window's start past a phase that is not training (validation, checkpoints)
  void exclude(double seconds, std::pair<double, double> comm_before, std::pair<double, double> comm_now) {
    start += seconds;
    comm.first += comm_now.first - comm_before.first;
    comm.second += comm_now.second - comm_before.second;
  }
};

std::pair<double, double> RunLoop::comm_totals() const {
  double seconds = 0, wire = 0;
  for (const auto& [name, c] : job_.grid().reported_comms())
    for (const auto& [kind, st] : c->stats()) {
      seconds += st.seconds;
      wire += st.wire_bytes;
    }
  return {seconds, wire};
}

TrainResult RunLoop::run() {
  set_up();
  const Grid& grid = job_.grid();
  for (size_t i = 0; i < job_.facts().description.size(); ++i) {
    const bool last = i + 1 == job_.facts().description.size();
    log_.info(job_.facts().description[i] + (last && !run_dir_.empty() ? "; run dir " + run_dir_ : ""));
  }
  std::unique_ptr<TraceRecorder> trace;
  if (!opts_.trace.empty()) {
    barrier(grid.world());  // every rank's time 0 at the same moment
    trace = std::make_unique<TraceRecorder>(Timers::now());
    timers_.set_trace(trace.get());
    grid.set_trace(trace.get());
  }
  TrainResult result = train();
  if (trace) {
    timers_.set_trace(nullptr);
    grid.set_trace(nullptr);
    const auto& g = grid.coords();
    const std::string row = trace_row(
        grid.world_rank(), *trace,
        strfmt("rank %d (data %d, stage %d, tensor %d,%d)", grid.world_rank(), g.data, g.pipeline, g.row, g.col));
    const std::vector<std::string> rows = gather_strings(grid.world(), row);
    if (grid.world_rank() == 0) write_chrome_trace(opts_.trace, rows);
    log_.info("strata: wrote the timeline of every rank to " + opts_.trace + " (tools/plot_trace.py draws it)");
  }
  job_.report_end(log_, result);
  return result;
}

TrainResult RunLoop::train() {
  const auto& rc = deck_.run;
  const FaultInjection& faults = opts_.faults;
  std::optional<StopWatchdog> own;
  StopWatchdog& watchdog = watchdog_ ? *watchdog_ : own.emplace(rc.stop_timeout, rank_);

  OptimizerStep<float> update(deck_.optim, rc.steps, job_.optimizer_groups());
  update.adamw().set_steps_taken(start_.optim_steps);
  TrainResult result;
  result.first_step = start_.step;
  if (start_.step >= rc.steps)
    log_.info(
        strfmt("strata: already at step %lld of %lld: nothing to do", (long long)start_.step, (long long)rc.steps));
  Window w;
  w.t_start = w.start = Timers::now();
  w.comm = comm_totals();
  double warm_start = -1;  // the end of the first round

  // a stop request as a streaming job asks for it inside a round: a signal, or (rank 0)
  // the wall-time budget at the rate of the rounds so far
  int64_t steps_before_round = 0;
  double slowest_step = 0;
  const std::function<bool()> stop_requested = [&] {
    return stop_signal_received() != 0 || (rank_ == 0 && out_of_walltime(rc.max_walltime, Timers::now() - w.t_start,
                                                                         steps_before_round, last_checkpoint_seconds_));
  };
  for (int64_t next = start_.step; next < rc.steps;) {
    const int64_t first = next;
    steps_before_round = first - start_.step;
    faults.before_step(first + 1, rank_);
    timers_.start("step");
    const std::vector<StepOutcome> done =
        job_.train_round(first, round_end(first) - first + 1, update, timers_, stop_requested);
    const double round_seconds = timers_.stop("step");
    const int64_t step = first + int64_t(done.size()) - 1;  // this round: steps first..step (0-based)
    next = step + 1;
    // a stop is taken up within a step (XPipe: a few steps and a drain): ten of the
    // slowest seen are what a healthy rank may need
    slowest_step = std::max(slowest_step, round_seconds / double(done.size()));
    watchdog.expect_at_most(10 * slowest_step);
    account(done, first, result, w);
    const bool last = step + 1 == rc.steps;
    Evaluation val = validate_if_due(step, result, w);
    log_if_due(step, done.back(), update.lr(step), val, result, w);

    bool out_of_time = false;
    const int request = agree_on_stop(step, w, out_of_time);
    if (request > 0) watchdog.acknowledge();
    const bool every = rc.checkpoint_every > 0 && ((step + 1) % rc.checkpoint_every == 0 || last);
    if (publisher_ && (every || request > 0))
      checkpoint(step, update.adamw().steps_taken(), val, faults.pause_checkpoint_at == step + 1, w);
    if (request >= 2) {
      // rank 0 holds the message; every rank ends with the same exit code
      throw IoError(w.output_failure + strfmt(" (stopped after step %lld%s)", (long long)step + 1,
                                              publisher_ ? ", with a checkpoint" : ""),
                    true);
    }
    if (request > 0 && !last) {
      result.stopped_early = true;
      const int sig = stop_signal_received();
      const char* why = sig != 0 ? signal_name(sig) : out_of_time ? "run.max_walltime" : "a signal to another rank";
      log_.info(strfmt("strata: stopping after step %lld of %lld (%s)%s", (long long)step + 1, (long long)rc.steps, why,
                       publisher_ ? "; resume with --restart latest" : ""));
      break;
    }
    if (warm_start < 0)
      warm_start = Timers::now();
    else
      result.warm_steps += int64_t(done.size());
  }
  result.seconds = Timers::now() - w.t_start;
  result.warm_seconds = result.warm_steps > 0 ? Timers::now() - warm_start : 0.0;
  result.tokens_per_second =
      double(job_.facts().samples_per_step) * double(result.losses.size()) / std::max(result.seconds, 1e-9);
  const auto [activations, weight_copies] = job_.memory();
  result.activation_bytes = activations;
  result.reordered_passes = timers_.entries().count("dispatch_reordered") ? timers_.entries().at("dispatch_reordered").calls : 0;
  result.state_bytes = job_.params().state_bytes() + weight_copies;
  print_summary(result);
  return result;
}

void RunLoop::account(const std::vector<StepOutcome>& done, int64_t first, TrainResult& result, Window& w) {
  const auto& rc = deck_.run;
  w.steps += int64_t(done.size());
  for (const StepOutcome& o : done) w.correct += o.correct;
  // a step whose loss or gradient norm is not finite was not applied: stop, or skip it
  // (the loss and the norm are global values, the same on every rank: so is the decision)
  for (size_t k = 0; k < done.size(); ++k) {
    const StepOutcome& o = done[k];
    result.losses.push_back(o.loss);
    if (o.applied) {
      w.skipped_in_a_row = 0;
      continue;
    }
    ++result.skipped_steps;
    ++w.skipped;
    ++w.skipped_in_a_row;
    const std::string what =
        strfmt("step %lld: the loss is %g and the gradient norm %g", (long long)(first + k + 1), o.loss, o.grad_norm);
    const std::string last_good = publisher_ && publisher_->directory().latest_name()
                                      ? "; the last good checkpoint is " + *publisher_->directory().latest_name()
                                      : "";
    if (rc.on_nonfinite == OnNonfinite::Stop)
      throw DivergedError(what + ": stopping (run.on_nonfinite = \"stop\"; \"skip\" skips such steps)" + last_good,
                          true);
    if (w.skipped_in_a_row >= rc.max_skipped_steps)
      throw DivergedError(
          what +
              strfmt(": %lld steps in a row skipped (run.max_skipped_steps): stopping", (long long)w.skipped_in_a_row) +
              last_good,
          true);
    log_.warn(what + ": skipped (run.on_nonfinite = \"skip\")");
  }
}

Evaluation RunLoop::validate_if_due(int64_t step, TrainResult& result, Window& w) {
  const auto& rc = deck_.run;
  const bool last = step + 1 == rc.steps;
  Evaluation val;
  if ((rc.val_every > 0 && (step + 1) % rc.val_every == 0) ||
      (last && (rc.val_every > 0 || job_.facts().validates_at_end))) {
    timers_.start("validation");
    const auto comm_before = comm_totals();
    val = job_.evaluate();
    w.exclude(timers_.stop("validation"), comm_before, comm_totals());
    result.val.emplace_back(step + 1, val.loss);
    if (!std::isnan(val.accuracy)) result.accuracy.emplace_back(step + 1, val.accuracy);
  }
  return val;
}

void RunLoop::log_if_due(int64_t step, const StepOutcome& last_outcome, double lr, const Evaluation& val,
                         const TrainResult& result, Window& w) {
  const auto& rc = deck_.run;
  if (!((step + 1) % rc.log_every == 0 || step + 1 == rc.steps || step == 0)) return;
  const double now = Timers::now();
  ProgressFigures p;
  p.window_steps = w.steps;
  p.seconds = now - w.start;
  p.grad_norm = last_outcome.grad_norm;
  p.lr = lr;
  p.val = val;
  p.correct = w.correct;
  std::vector<double> row = {double(step + 1), last_outcome.loss};
  std::string line = strfmt("step %5lld/%lld | loss %.4f", (long long)step + 1, (long long)rc.steps, last_outcome.loss);
  line += job_.metrics().progress(p, row);
  // this rank's communication: share of the step time (validation excluded), volume per step
  const auto comm_now = comm_totals();
  const double comm_seconds = comm_now.first - w.comm.first, comm_bytes = comm_now.second - w.comm.second;
  if (job_.grid().world_size() > 1)
    line += strfmt(" | comm %.0f%% %.2f MiB/step", 100.0 * std::min(comm_seconds / p.seconds, 1.0),
                   comm_bytes / double(p.window_steps) / double(1 << 20));
  if (w.skipped > 0) line += strfmt(" | skipped %lld", (long long)w.skipped);
  line += strfmt(" | mem %.0f MiB | ETA %s", double(peak_rss_bytes()) / (1 << 20),
                 hms(p.seconds / double(w.steps) * double(rc.steps - step - 1)).c_str());
  log_.info(line);
  if (stage_times_) stage_times_->window_done(step, w.steps, p.seconds, timers_);
  row.push_back(double(result.skipped_steps));
  if (metrics_ && w.output_failure.empty()) {
    try {
      metrics_->row(row);
    } catch (const StrataError& e) {
      w.output_failure = e.what();
    }
  }
  w.start = now;
  w.comm = comm_now;
  w.steps = w.skipped = w.correct = 0;
}

// Stop requests (a signal on any rank, the wall-time budget by rank 0's clock, an output
// that failed) are decided together: one small all-reduce per round, so every rank stops
// after the same step.
int RunLoop::agree_on_stop(int64_t step, const Window& w, bool& out_of_time) {
  out_of_time = rank_ == 0 && out_of_walltime(deck_.run.max_walltime, Timers::now() - w.t_start, step + 1 - start_.step,
                                              last_checkpoint_seconds_);
  const double request = !w.output_failure.empty() ? 2.0 : stop_signal_received() != 0 || out_of_time ? 1.0 : 0.0;
  return int(max_over(job_.grid().world(), request));
}

// This rank among the ranks that hold the same values, for the checkpoint's writers.
static ReplicaPlace replica_place(const Grid& grid) {
  return {grid.replicas().rank(), grid.replicas().size(), grid.expert_replicas().rank(), grid.expert_replicas().size()};
}

void RunLoop::checkpoint(int64_t step, int64_t optim_steps, Evaluation& val, bool pause, Window& w) {
  timers_.start("checkpoint");
  const auto comm_before = comm_totals();
  if (std::isnan(val.loss)) val = job_.evaluate();
  const auto written = publisher_->publish(checkpoint_state(step + 1, optim_steps, val.loss), job_.params(), deck_,
                                           job_.facts().layout, replica_place(job_.grid()), pause);
  last_checkpoint_seconds_ = written.seconds;
  log_.info(strfmt("strata: checkpoint %s: %.1f MiB in %.3f s (%.0f MB/s; checks %.3f s), val loss %.4f",
                   written.path.c_str(), double(written.bytes) / (1 << 20), written.seconds,
                   double(written.bytes) / 1e6 / std::max(written.seconds, 1e-9), written.check_seconds, val.loss));
  w.exclude(timers_.stop("checkpoint"), comm_before, comm_totals());
}

static RunTotals run_totals(const TrainResult& r, double seconds) {
  RunTotals t;
  t.steps = int64_t(r.losses.size());
  t.seconds = seconds;
  if (!r.losses.empty()) t.final_loss = r.losses.back();
  if (!r.accuracy.empty()) t.final_accuracy = r.accuracy.back().second;
  return t;
}

void RunLoop::print_summary(const TrainResult& r) {
  // Every rank takes part in the reductions; rank 0 prints.
  const MPI_Comm world = job_.grid().world();
  const double loop = max_over(world, r.seconds);
  const int64_t steps_run = int64_t(r.losses.size());
  log_.info(strfmt("strata: done: %lld steps in %.2f s", (long long)steps_run, loop) +
            job_.metrics().done_line(run_totals(r, loop)) +
            (r.skipped_steps > 0 ? strfmt(", %lld skipped", (long long)r.skipped_steps) : ""));
  log_.info("timer            total_s   calls   ms/call   % of loop   (max over ranks)");
  for (const auto& [name, e] : max_over_ranks(timers_, world))
    log_.info(strfmt("%-15s %8.3f %7lld %9.3f %10.1f", name.c_str(), e.seconds, (long long)e.calls,
                     1e3 * e.seconds / double(std::max<int64_t>(1, e.calls)), 100.0 * e.seconds / loop));
  if (stage_times_ && !stage_times_->summary().empty()) log_.info("pipeline: " + stage_times_->summary());
  const double mib = 1 << 20;
  auto& store = job_.params();
  const auto buffer_mib = [&](Tensor1<float>& b) { return double(b.extent(0)) * sizeof(float) / mib; };
  const int data = job_.grid().replicas().size();
  log_.info(
      strfmt("memory (rank 0): parameters %.2f MiB, gradients %.2f MiB, AdamW moments %.2f MiB%s, activations "
             "%.2f MiB%s (state + activations %.2f MiB), peak RSS %.0f MiB",
             double(store.param_bytes()) / mib, double(store.grad_bytes()) / mib,
             buffer_mib(store.zero().adam_m()) + buffer_mib(store.zero().adam_v()),
             store.zero().params_sharded()
                 ? strfmt(" (ZeRO-3: 1/%d of them, of the gradients and of the parameters, with %d unit gradient slots "
                          "and at most %d units gathered at once)",
                          data, store.zero().gradient_slots()->slots_allocated(),
                          store.zero().param_gather()->slots_allocated())
                       .c_str()
             : store.zero().gradients_sharded()
                 ? strfmt(" (ZeRO-2: 1/%d of them, and of the gradients, with %d unit gradient slots)", data,
                          store.zero().gradient_slots()->slots_allocated())
                       .c_str()
             : store.zero().moments_sharded() ? strfmt(" (ZeRO-1: 1/%d of them)", data).c_str()
                                              : "",
             double(r.activation_bytes) / mib,
             r.state_bytes > store.state_bytes()
                 ? strfmt(", weight copies %.2f MiB", double(r.state_bytes - store.state_bytes()) / mib).c_str()
                 : "",
             double(r.state_bytes + r.activation_bytes) / mib, double(peak_rss_bytes()) / mib));
  if (store.numel() > store.expert_begin()) {  // mixtures of experts: this rank's experts in those figures
    int64_t experts = 0, moments = 0;
    for (const auto& p : store.infos())
      if (p.expert) {
        experts += p.numel;
        for (const auto& part : store.zero().moment_parts(p)) moments += 2 * (part.end - part.begin);
      }
    // ZeRO-2's gradients (ZeRO-3's parameters too): the experts' region's part, and its
    // slot where it has a group to sum (gather) over
    int64_t grads = experts, params = experts;
    if (const auto* slots = store.zero().gradient_slots()) {
      grads = 0;
      for (const auto& u : slots->units())
        if (u.begin >= store.expert_begin()) grads += u.part() + (u.shards > 1 ? u.end - u.begin : 0);
      if (store.zero().params_sharded()) params = grads;
    }
    log_.info(
        strfmt("memory (rank 0), of which experts (%d of every mixture layer's %lld here): parameters %.2f MiB, "
               "gradients %.2f MiB, AdamW moments %.2f MiB",
               int(deck_.model.moe_experts / expert_ranks(deck_.parallel)), (long long)deck_.model.moe_experts,
               double(params) * sizeof(float) / mib, double(grads) * sizeof(float) / mib,
               double(moments) * sizeof(float) / mib));
  }
  if (job_.grid().world_size() == 1) return;
  const auto [comm_s, comm_wire] = comm_totals();
  log_.info(strfmt("communication (rank 0): %.3f s = %.1f%% of the loop, %.3f MiB/step sent (bandwidth-optimal count)",
                   comm_s, 100.0 * comm_s / loop, comm_wire / double(std::max<int64_t>(1, steps_run)) / (1 << 20)));
  // seconds: exposed (the rank waited); overlapped: non-blocking transfers' time in flight
  // while the rank computed (Comm::CommStats)
  log_.info("comm group    kind                 calls  payload_MiB   wire_MiB    seconds  overlapped");
  for (const auto& [group, c] : job_.grid().reported_comms())
    for (const auto& [kind, st] : c->stats())
      if (st.calls > 0 && (st.bytes > 0 || st.seconds > 1e-4))
        log_.info(strfmt("comm %-8s %-20s %7lld %12.2f %10.2f %10.3f %11.3f", group.c_str(), kind.c_str(),
                         (long long)st.calls, double(st.bytes) / (1 << 20), st.wire_bytes / (1 << 20), st.seconds,
                         st.overlapped_seconds));
}

}  // namespace strata
