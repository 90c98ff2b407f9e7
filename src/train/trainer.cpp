#include "train/trainer.hpp"

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>

#include "comm/agree.hpp"
#include "core/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "engine/data_parallel.hpp"
#include "engine/pipeline/pipeline_engine.hpp"
#include "io/batch.hpp"
#include "io/checkpoint_dir.hpp"
#include "io/metrics_csv.hpp"
#include "io/random_tokens.hpp"
#include "io/text_dataset.hpp"
#include "io/trace_file.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_clip.hpp"
#include "train/gemm_probe.hpp"
#include "train/stop_signals.hpp"

namespace strata {
namespace {

int world_rank(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

// Every timer any rank has, with its largest time and call count over the ranks. Ranks
// need not have the same timers (an XPipe stage that never predicts has no
// weight_prediction timer), so the names are agreed on before the values are reduced.
std::map<std::string, Timers::Entry> max_over_ranks(const Timers& timers, MPI_Comm comm) {
  std::string mine;
  for (const auto& [name, e] : timers.entries()) mine += name + '\n';
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  int length = int(mine.size());
  std::vector<int> lengths(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks), 0);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm);
  for (int r = 1; r < ranks; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::string all(size_t(offsets.back() + lengths.back()), '\0');
  MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm);
  std::map<std::string, Timers::Entry> out;
  for (size_t begin = 0, end; (end = all.find('\n', begin)) != std::string::npos; begin = end + 1)
    out[all.substr(begin, end - begin)] = {};
  std::vector<double> values;  // seconds and calls, in the union's order
  for (const auto& [name, unused] : out) {
    const auto it = timers.entries().find(name);
    values.push_back(it == timers.entries().end() ? 0.0 : it->second.seconds);
    values.push_back(it == timers.entries().end() ? 0.0 : double(it->second.calls));
  }
  MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_MAX, comm);
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

Trainer::Trainer(const Deck& deck, MPI_Comm world, TrainOptions opts)
    : deck_(deck), opts_(opts), log_(opts.print ? world_rank(world) : -1) {
  std::exception_ptr err;
  try {
    grid_ = std::make_unique<Grid>(deck_.parallel, world);
    const auto& par = deck_.parallel;
    if (par.micro_batches > 1 && par.pipeline == 1)
      throw UserError("parallel.micro_batches = " + std::to_string(par.micro_batches) +
                      " needs parallel.pipeline > 1 (micro-batches feed pipeline stages)");
    world_comm_ = std::make_unique<Comm>(grid_->world());
    model_comm_ = std::make_unique<Comm>(grid_->model_group());
    data_comm_ = std::make_unique<Comm>(grid_->data_group(), parse_comm_backend(deck_.parallel.comm_backend));
    setup_tensor_parallel();
    if (deck_.data.kind == "text")
      data_ = std::make_unique<TextDataset>(deck_.data.files, deck_.data.val_fraction, deck_.model.seq_len,
                                            deck_.run.seed);
    else
      data_ = std::make_unique<RandomTokens>(deck_.model.vocab_size, deck_.run.seed);
    const auto placement =
        StagePlacement::balanced(int(deck_.model.n_layer), int(par.pipeline), grid_->coords().pipeline);
    model_ = std::make_unique<GPT<float>>(deck_.model, deck_.run.seed, tp_, placement);
    if (par.pipeline > 1) {
      auto pipeline = std::make_unique<PipelineEngine<float>>(*model_, *grid_, *data_comm_, par.schedule,
                                                              int(par.micro_batches));
      if (pipeline->asynchronous()) stream_ = pipeline.get();
      engine_ = std::move(pipeline);
      if (par.measure_staleness) staleness_ = std::make_unique<StalenessMeter<float>>();
    } else
      engine_ = std::make_unique<DataParallel<float>>(*model_, *data_comm_, par.grad_bucket_mb * 1e6);
    if (opts_.write_outputs) run_dir_ = deck_.run.out_dir + "/" + deck_.run.name;
    // an unwritable trace file must stop the run before it trains, not after
    if (!opts_.trace.empty() && world_rank(world) == 0 && !std::ofstream(opts_.trace))
      throw UserError("cannot write the trace file '" + opts_.trace + "'");
    // A bad checkpoint must stop the run before it writes anything.
    if (!opts_.restart.empty()) restart_from(opts_.restart);
    if (opts_.write_outputs && world_rank(world) == 0) {
      make_directories(run_dir_ + "/checkpoints");
      std::ofstream(run_dir_ + "/deck.toml") << deck_.resolved_toml;
    }
  } catch (...) {
    err = std::current_exception();
  }
  agree_on_error(world, err);
}

Trainer::~Trainer() = default;

void Trainer::setup_tensor_parallel() {
  const auto& p = deck_.parallel;
  const bool two_d = p.tensor_mode == "2d";  // even at q = 1: the 2D code path on one rank
  if (!two_d && p.tensor_cols == 1) return;
  tensor_comm_ = std::make_unique<Comm>(grid_->tensor_group());
  tp_.group = tensor_comm_.get();
  if (two_d) {
    row_comm_ = std::make_unique<Comm>(grid_->tensor_row());
    col_comm_ = std::make_unique<Comm>(grid_->tensor_col());
    tp_.mode = TensorMode::TwoD;
    tp_.row = row_comm_.get();
    tp_.col = col_comm_.get();
    tp_.q = int(p.tensor_rows);
    tp_.i = grid_->coords().row;
    tp_.j = grid_->coords().col;
  } else {
    tp_.mode = TensorMode::OneD;
    tp_.t = int(p.tensor_cols);
    tp_.rank = grid_->coords().col;
  }
}

std::string Trainer::layout() const {
  std::string s = "data=" + std::to_string(grid_->data_size());
  const auto& par = deck_.parallel;
  if (par.pipeline > 1)
    s += " pipeline=" + std::to_string(par.pipeline) + ":" + par.schedule + ":" + std::to_string(par.micro_batches) + "mb";
  if (tp_.mode == TensorMode::OneD) s += " tensor=1d:" + std::to_string(tp_.t);
  if (tp_.mode == TensorMode::TwoD) s += " tensor=2d:" + std::to_string(tp_.q) + "x" + std::to_string(tp_.q);
  return s;
}

std::vector<std::pair<std::string, const Comm*>> Trainer::comms() const {
  std::vector<std::pair<std::string, const Comm*>> out = {{"data", data_comm_.get()}};
  if (auto* pipe = dynamic_cast<const PipelineEngine<float>*>(engine_.get())) {
    out.emplace_back("pipeline", &pipe->pipeline_comm());
    if (pipe->embedding_comm()) out.emplace_back("tied_emb", pipe->embedding_comm());
  }
  if (tp_.mode == TensorMode::OneD) out.emplace_back("tensor", tensor_comm_.get());
  if (tp_.mode == TensorMode::TwoD) {
    out.emplace_back("tensor", tensor_comm_.get());
    out.emplace_back("grid_row", row_comm_.get());
    out.emplace_back("grid_col", col_comm_.get());
  }
  return out;
}

std::pair<double, double> Trainer::comm_totals() const {
  double seconds = 0, wire = 0;
  for (const auto& [name, c] : comms())
    for (const auto& [kind, st] : c->stats()) {
      seconds += st.seconds;
      wire += st.wire_bytes;
    }
  return {seconds, wire};
}

void Trainer::restart_from(const std::string& what) {
  std::string path = what;
  if (what == "latest") {
    if (run_dir_.empty()) throw UserError("--restart latest needs the run directory (outputs are off)");
    const auto latest = CheckpointDirectory(run_dir_ + "/checkpoints").latest();
    if (!latest) {
      log_.info("strata: restart: no checkpoint in " + run_dir_ + "/checkpoints: starting fresh");
      return;
    }
    path = *latest;
  }
  const double t0 = Timers::now();
  start_ = read_model_checkpoint(path, model_->params());
  const double dt = Timers::now() - t0;
  const double mib = 3.0 * double(model_->params().numel()) * sizeof(float) / double(1 << 20);  // this rank's shards
  log_.info(strfmt("strata: restart: read %s (step %lld, %.1f MiB of tensors) in %.3f s (%.0f MB/s)", path.c_str(),
                   (long long)start_.step, mib, dt, mib * 1.048576 / dt));
}

void Trainer::write_checkpoint(TrainingState state) {
  if (std::isnan(state.val_loss)) state.val_loss = validate();
  CheckpointDirectory dir(run_dir_ + "/checkpoints");
  const char* pause = std::getenv("STRATA_TEST_PAUSE_CHECKPOINT_AT_STEP");  // test hook (see tests/)
  const bool pause_here = pause && std::atoll(pause) == state.step;
  const double t0 = Timers::now();
  const int64_t bytes = write_model_checkpoint(dir.temp_path(state.step), grid_->world(), grid_->data_rank(),
                                               grid_->data_size(), model_->params(), state, deck_, layout(), pause_here);
  if (grid_->world_rank() == 0) dir.publish(state.step, deck_.run.keep_checkpoints);
  MPI_Barrier(grid_->world());  // nobody goes on (or exits) before LATEST names the new file
  last_checkpoint_seconds_ = Timers::now() - t0;
  log_.info(strfmt("strata: checkpoint %s: %.1f MiB in %.3f s (%.0f MB/s), val loss %.4f",
                   dir.final_path(state.step).c_str(), double(bytes) / (1 << 20), last_checkpoint_seconds_,
                   double(bytes) / 1e6 / last_checkpoint_seconds_, state.val_loss));
}

double Trainer::validate() {
  const int64_t gb = deck_.data.batch_size, lb = gb / grid_->data_size();
  Batch batch(lb, deck_.model.seq_len);
  double sum = 0;
  for (int64_t j = 0; j < deck_.run.val_batches; ++j) {
    batch.load(*data_, Split::Validation, j, grid_->data_rank(), grid_->data_size(), deck_.parallel.micro_batches);
    sum += engine_->evaluate(batch.tokens(), batch.targets(), lb, gb);
  }
  return sum / double(deck_.run.val_batches);
}

int64_t Trainer::stream_length(int64_t step) const {
  const auto& rc = deck_.run;
  const auto divides = [](int64_t every, int64_t n) { return every > 0 && n % every == 0; };
  int64_t end = step;  // the first step from `step` on after which the trainer looks at the run
  while (!(end + 1 == rc.steps || end == 0 || divides(rc.log_every, end + 1) || divides(rc.val_every, end + 1) ||
           (!run_dir_.empty() && divides(rc.checkpoint_every, end + 1))))
    ++end;
  return end - step + 1;
}

StreamStep Trainer::train_step(int64_t step, AdamW<float>& optim, Batch& batch) {
  const int64_t gb = deck_.data.batch_size, lb = gb / grid_->data_size();
  timers_.start("data");
  batch.load(*data_, Split::Train, step, grid_->data_rank(), grid_->data_size(), deck_.parallel.micro_batches);
  timers_.stop("data");
  StreamStep out;
  out.loss = engine_->forward_backward(batch.tokens(), batch.targets(), lb, gb, timers_);
  timers_.start("optimizer");
  out.grad_norm = clip_grad_norm<float>(model_->params(), model_comm_.get(), deck_.optim.grad_clip);
  optim.step(model_->params(), lr_at_step(deck_.optim, step, deck_.run.steps));
  timers_.stop("optimizer");
  return out;
}

std::vector<StreamStep> Trainer::train_stream(int64_t first_step, int64_t count, AdamW<float>& optim) {
  const int64_t gb = deck_.data.batch_size, lb = gb / grid_->data_size();
  timers_.start("data");
  while (int64_t(stream_batches_.size()) < count) stream_batches_.push_back(std::make_unique<Batch>(lb, deck_.model.seq_len));
  std::vector<MiniBatchView> views;
  for (int64_t k = 0; k < count; ++k) {
    stream_batches_[k]->load(*data_, Split::Train, first_step + k, grid_->data_rank(), grid_->data_size(),
                             deck_.parallel.micro_batches);
    views.push_back({stream_batches_[k]->tokens(), stream_batches_[k]->targets()});
  }
  timers_.stop("data");
  StreamUpdate<float> update;
  update.optim = &optim;
  update.config = deck_.optim;
  update.lr_at = [this](int64_t step) { return lr_at_step(deck_.optim, step, deck_.run.steps); };
  update.tensor_group = tp_.group;
  update.predict = deck_.parallel.weight_prediction;
  update.meter = staleness_.get();
  return stream_->train_stream(first_step, views, lb, gb, update, timers_);
}

TrainResult Trainer::run() {
  const auto& rc = deck_.run;
  const int64_t gb = deck_.data.batch_size, ranks = grid_->data_size(), lb = gb / ranks;
  const int64_t world = grid_->world_size();
  const int64_t t_len = deck_.model.seq_len;
  const double tokens_per_step = double(gb) * double(t_len);
  const double flops_per_step = model_->flops_per_token() * tokens_per_step;

  if (opts_.probe_gemm)
    gemm_gflops_ = measure_gemm_gflops(std::min<int64_t>(lb * t_len, 2048), deck_.model.n_embd, 4 * deck_.model.n_embd);
  if (!std::getenv("OPENBLAS_NUM_THREADS") && world > 1)
    log_.warn("OPENBLAS_NUM_THREADS is not set: each rank's OpenBLAS may start one thread per core and oversubscribe");
  log_.info(strfmt("strata: GPT %lld layers, C=%lld, %lld heads, vocab %lld, T=%lld: %.2fM parameters; %s data",
                   (long long)deck_.model.n_layer, (long long)deck_.model.n_embd, (long long)deck_.model.n_head,
                   (long long)deck_.model.vocab_size, (long long)t_len, double(model_->params().global_numel()) / 1e6,
                   deck_.data.kind.c_str()));
  if (auto* text = dynamic_cast<TextDataset*>(data_.get()))
    log_.info(strfmt("strata: data: %zu files, %lld train / %lld validation bytes", text->files().size(),
                     (long long)text->train_bytes(), (long long)text->val_bytes()));
  const std::string blas = blas_core_name();
  log_.info(strfmt("strata: %lld ranks (%s; data-parallel %s collectives), global batch %lld x %lld tokens, %lld steps; gemm probe %.1f GFLOP/s per rank%s%s",
                   (long long)world, layout().c_str(), deck_.parallel.comm_backend.c_str(), (long long)gb, (long long)t_len, (long long)rc.steps, gemm_gflops_,
                   blas.empty() ? "" : (" (OpenBLAS " + blas + " kernels)").c_str(),
                   run_dir_.empty() ? "" : ("; run dir " + run_dir_).c_str()));

  std::unique_ptr<MetricsCsv> metrics;
  if (!run_dir_.empty() && grid_->world_rank() == 0)
    metrics = std::make_unique<MetricsCsv>(run_dir_ + "/metrics.csv",
                                           std::vector<std::string>{"step", "loss", "val_loss", "lr", "grad_norm",
                                                                    "ms_per_step", "tokens_per_s", "gflops_per_s",
                                                                    "peak_rss_mib"},
                                           start_.step > 0 ? start_.step : -1);

  AdamW<float> optim(deck_.optim);
  optim.set_steps_taken(start_.optim_steps);
  Batch batch(lb, t_len);
  TrainResult result;
  result.first_step = start_.step;
  const bool checkpoints = !run_dir_.empty();
  if (start_.step >= rc.steps) log_.info(strfmt("strata: already at step %lld of %lld: nothing to do", (long long)start_.step, (long long)rc.steps));
  std::unique_ptr<TraceRecorder> trace;
  if (!opts_.trace.empty()) {
    MPI_Barrier(grid_->world());  // every rank's time 0 at the same moment
    trace = std::make_unique<TraceRecorder>(Timers::now());
    timers_.set_trace(trace.get());
  }
  const double t_start = Timers::now();
  double warm_start = -1;  // the end of the first round
  double window_start = t_start;
  int64_t window_steps = 0;
  auto window_comm = comm_totals();  // (seconds, wire bytes) at the window's start
  // shifts the window's baseline past what happened since `before` (validation, checkpoints)
  const auto exclude_from_window = [&](std::pair<double, double> base, std::pair<double, double> before) {
    const auto now = comm_totals();
    return std::make_pair(base.first + now.first - before.first, base.second + now.second - before.second);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();

  for (int64_t next = start_.step; next < rc.steps;) {
    // one step, or for XPipe a stream of steps up to the next one that logs, validates
    // or checkpoints (the pipeline drains there)
    const int64_t count = stream_ ? stream_length(next) : 1;
    const int64_t step = next + count - 1;  // the last step of this round
    next = step + 1;
    timers_.start("step");
    const std::vector<StreamStep> done = stream_ ? train_stream(step + 1 - count, count, optim)
                                                 : std::vector<StreamStep>{train_step(step, optim, batch)};
    timers_.stop("step");
    window_steps += count;
    for (int64_t k = 0; k < count; ++k) {
      result.losses.push_back(done[k].loss);
      if (!std::isfinite(done[k].loss))
        throw std::runtime_error(strfmt("loss is %f at step %lld", done[k].loss, (long long)(step - count + k + 2)));
    }
    const double loss = done.back().loss, norm = done.back().grad_norm;
    const double lr = lr_at_step(deck_.optim, step, rc.steps);

    double val = nan;
    const bool last = step + 1 == rc.steps;
    if ((rc.val_every > 0 && (step + 1) % rc.val_every == 0) || (last && rc.val_every > 0)) {
      timers_.start("validation");
      const auto comm_before_validation = comm_totals();
      val = validate();
      window_start += timers_.stop("validation");  // the step rate excludes validation
      window_comm = exclude_from_window(window_comm, comm_before_validation);
      result.val.emplace_back(step + 1, val);
    }
    if ((step + 1) % rc.log_every == 0 || last || step == 0) {
      const double now = Timers::now();
      const double dt = (now - window_start) / double(window_steps);
      const double tok_s = tokens_per_step / dt;
      const double gflops = flops_per_step / dt / 1e9;
      const double mem_mib = double(peak_rss_bytes()) / (1 << 20);
      const double eta = dt * double(rc.steps - step - 1);
      std::string line = strfmt("step %5lld/%lld | loss %.4f", (long long)step + 1, (long long)rc.steps, loss);
      if (!std::isnan(val)) line += strfmt(" | val %.4f", val);
      line += strfmt(" | lr %.2e | norm %.3f | %.0f tok/s | %.1f ms/step | %.1f GFLOP/s", lr, norm, tok_s, dt * 1e3,
                     gflops);
      if (gemm_gflops_ > 0) line += strfmt(" (%.0f%% of gemm)", 100.0 * gflops / (gemm_gflops_ * double(world)));
      // this rank's communication: share of the step time (validation excluded), volume per step
      const auto comm_now = comm_totals();
      const double comm_share = (comm_now.first - window_comm.first) / (now - window_start);
      const double comm_mib = (comm_now.second - window_comm.second) / double(window_steps) / double(1 << 20);
      window_comm = comm_now;
      if (world > 1) line += strfmt(" | comm %.0f%% %.2f MiB/step", 100.0 * std::min(comm_share, 1.0), comm_mib);
      line += strfmt(" | mem %.0f MiB | ETA %s", mem_mib, hms(eta).c_str());
      log_.info(line);
      if (metrics) metrics->row({double(step + 1), loss, val, lr, norm, dt * 1e3, tok_s, gflops, mem_mib});
      window_start = now;
      window_steps = 0;
    }

    // Stop requests (a signal on any rank, or the wall-time budget) are decided together:
    // one small all-reduce per step, so every rank stops after the same step.
    bool out_of_time = false;  // judged by rank 0's clock alone, so the log names the reason
    if (grid_->world_rank() == 0)
      out_of_time = out_of_walltime(rc.max_walltime, Timers::now() - t_start, step + 1 - start_.step,
                                    last_checkpoint_seconds_);
    const bool stop = world_comm_->allreduce_max(stop_signal_received() != 0 || out_of_time ? 1.0 : 0.0) > 0;
    const bool every = rc.checkpoint_every > 0 && ((step + 1) % rc.checkpoint_every == 0 || last);
    if (checkpoints && (every || stop)) {
      timers_.start("checkpoint");
      const auto comm_before_checkpoint = comm_totals();
      write_checkpoint({step + 1, optim.steps_taken(), int64_t((step + 1) * tokens_per_step), val});  // NaN: validate
      window_start += timers_.stop("checkpoint");
      window_comm = exclude_from_window(window_comm, comm_before_checkpoint);
    }
    if (stop && !last) {
      result.stopped_early = true;
      const int sig = stop_signal_received();
      const char* why = sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : out_of_time ? "run.max_walltime"
                                                                                              : "a signal to another rank";
      log_.info(strfmt("strata: stopping after step %lld of %lld (%s)%s", (long long)step + 1, (long long)rc.steps, why,
                       checkpoints ? "; resume with --restart latest" : ""));
      break;
    }
    if (warm_start < 0) warm_start = Timers::now();
    else result.warm_steps += count;
  }
  result.seconds = Timers::now() - t_start;
  result.warm_seconds = result.warm_steps > 0 ? Timers::now() - warm_start : 0.0;
  result.activation_bytes = engine_->activation_bytes();
  if (trace) {
    timers_.set_trace(nullptr);
    const auto& g = grid_->coords();
    write_chrome_trace(opts_.trace, grid_->world(), *trace,
                       strfmt("rank %d (data %d, stage %d, tensor %d,%d)", grid_->world_rank(), g.data, g.pipeline,
                              g.row, g.col));
    log_.info("strata: wrote the timeline of every rank to " + opts_.trace + " (tools/plot_trace.py draws it)");
  }
  result.tokens_per_second = tokens_per_step * double(result.losses.size()) / std::max(result.seconds, 1e-9);
  print_summary(result);
  if (staleness_) result.staleness = report_staleness();
  return result;
}

std::vector<StalenessSummary> Trainer::report_staleness() {
  // one rank per stage reports (data replica 0, tensor coordinates 0,0); the others add zeros
  const auto& g = grid_->coords();
  const bool reports = g.data == 0 && g.row == 0 && g.col == 0;
  const auto& mine = staleness_->summary();
  log_.info(std::string("xpipe staleness: mean |W - W_target| / |W_target| over the passes with s > 0, ") +
            (deck_.parallel.weight_prediction ? "the predicted weights each pass ran on and the current ones"
                                              : "the current weights each pass ran on (no prediction)"));
  std::vector<StalenessSummary> out(size_t(deck_.parallel.pipeline));
  for (int stage = 0; stage < int(out.size()); ++stage) {
    const bool here = reports && g.pipeline == stage;
    auto& s = out[stage];
    s.passes = int64_t(world_comm_->allreduce_sum(here ? double(mine.passes) : 0.0));
    s.ahead = int64_t(world_comm_->allreduce_sum(here ? double(mine.ahead) : 0.0));
    s.sum_used = world_comm_->allreduce_sum(here ? mine.sum_used : 0.0);
    s.sum_current = world_comm_->allreduce_sum(here ? mine.sum_current : 0.0);
    if (deck_.parallel.weight_prediction)
      log_.info(strfmt("xpipe staleness stage %d: %lld of %lld passes with s > 0: predicted %.3e, current %.3e (ratio %.2f)",
                       stage, (long long)s.ahead, (long long)s.passes, s.mean_used(), s.mean_current(),
                       s.mean_current() > 0 ? s.mean_used() / s.mean_current() : 0.0));
    else
      log_.info(strfmt("xpipe staleness stage %d: %lld of %lld passes with s > 0: current %.3e", stage,
                       (long long)s.ahead, (long long)s.passes, s.mean_current()));
  }
  return out;
}

void Trainer::print_summary(const TrainResult& r) {
  // Every rank takes part in the reductions; rank 0 prints.
  const double loop = world_comm_->allreduce_max(r.seconds);
  log_.info(strfmt("strata: done: %lld steps in %.2f s, %.0f tokens/s, final loss %.4f",
                   (long long)r.losses.size(), loop, r.tokens_per_second, r.losses.empty() ? 0.0 : r.losses.back()));
  log_.info("timer            total_s   calls   ms/call   % of loop   (max over ranks)");
  for (const auto& [name, e] : max_over_ranks(timers_, grid_->world()))
    log_.info(strfmt("%-15s %8.3f %7lld %9.3f %10.1f", name.c_str(), e.seconds, (long long)e.calls,
                     1e3 * e.seconds / double(std::max<int64_t>(1, e.calls)), 100.0 * e.seconds / loop));
  const double mib = 1 << 20;
  const double param_mib = double(model_->params().numel()) * sizeof(float) / mib;
  log_.info(strfmt("memory (rank 0): parameters %.2f MiB (with gradients and AdamW moments %.2f MiB), activations "
                   "%.2f MiB, peak RSS %.0f MiB",
                   param_mib, 4 * param_mib, double(engine_->activation_bytes()) / mib, double(peak_rss_bytes()) / mib));
  if (grid_->world_size() == 1) return;
  const auto [comm_s, comm_wire] = comm_totals();
  log_.info(strfmt("communication (rank 0): %.3f s = %.1f%% of the loop, %.3f MiB/step sent (bandwidth-optimal count)",
                   comm_s, 100.0 * comm_s / loop, comm_wire / double(std::max<size_t>(1, r.losses.size())) / (1 << 20)));
  log_.info("comm group    kind                 calls  payload_MiB   wire_MiB    seconds");
  for (const auto& [group, c] : comms())
    for (const auto& [kind, st] : c->stats())
      if (st.calls > 0 && (st.bytes > 0 || st.seconds > 1e-4))
        log_.info(strfmt("comm %-8s %-20s %7lld %12.2f %10.2f %10.3f", group.c_str(), kind.c_str(), (long long)st.calls,
                         double(st.bytes) / (1 << 20), st.wire_bytes / (1 << 20), st.seconds));
}

}  // namespace strata
