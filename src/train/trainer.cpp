#include "train/trainer.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "engine/data_parallel.hpp"
#include "io/trace_file.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/gemm_probe.hpp"
#include "train/token_data.hpp"

namespace strata {
namespace {

SampleBatch<float> samples_of(const Batch& b) {
  SampleBatch<float> s;
  s.samples = b.local_batch();
  s.tokens = b.tokens();
  s.targets = b.targets();
  return s;
}

}  // namespace

Trainer::Trainer(const Deck& deck, MPI_Comm world, TrainOptions opts)
    : deck_(deck), opts_(opts), log_(opts.print ? rank_in(world) : -1) {
  const auto& par = deck_.parallel;
  // Set-up in phases, each agreed by every rank before the next one's collectives, so a
  // failure on some ranks only (a file missing on one node) ends every rank alike.
  agreed(world, [&] {
    grid_ = std::make_unique<Grid>(par, world);
    tp_ = tensor_parallel_of(*grid_);
    tp_.precision = deck_.model.precision;
    tp_.recompute = deck_.parallel.recompute;
    require_precision_runs(tp_.precision);
  });
  agreed(world, [&] {
    data_ = make_token_source(deck_);
    if (deck_.data.kind == "tokens")
      if (const auto tok = deck_tokenizer(deck_)) tokenizer_model_ = tok->serialized();
    // an unwritable trace file must stop the run before it trains, not after
    if (!opts_.trace.empty() && grid_->world_rank() == 0 && !std::ofstream(opts_.trace))
      throw UserError("cannot write the trace file '" + opts_.trace + "'");
  });
  agreed(world, [&] {
    const auto placement =
        StagePlacement::interleaved(int(deck_.model.n_layer), int(par.pipeline),
                                    par.schedule == Schedule::Interleaved ? int(par.virtual_stages) : 1,
                                    grid_->coords().pipeline);
    model_ = std::make_unique<GPT<float>>(deck_.model, deck_.run.seed, tp_, placement);
    shard_optimizer_state(model_->params(), *grid_, par.zero);
    batches_.push_back(std::make_unique<Batch>(deck_.data.batch_size / grid_->data_size(), deck_.model.seq_len));
  });
  agreed(world, [&] {
    if (par.pipeline > 1) {
      auto pipeline = std::make_unique<PipelineEngine<float>>(*model_, *grid_, par.schedule, int(par.micro_batches));
      if (par.measure_staleness) staleness_ = std::make_unique<StalenessMeter<float>>();
      pipeline->set_stream_options(par.weight_prediction, staleness_.get());
      engine_ = std::move(pipeline);
    } else {
      engine_ = std::make_unique<DataParallel<float>>(*model_, grid_->data(), par.grad_bucket_mb * 1e6,
                                                      int(par.micro_batches));
    }
  });
  loop_ = std::make_unique<RunLoop>(deck_, opts_, *this, log_);
}

Trainer::~Trainer() = default;

std::string Trainer::layout() const { return layout_name(deck_.parallel); }

std::pair<double, double> Trainer::comm_totals() const {
  double seconds = 0, wire = 0;
  for (const auto& [name, c] : grid_->reported_comms())
    for (const auto& [kind, st] : c->stats()) {
      seconds += st.seconds;
      wire += st.wire_bytes;
    }
  return {seconds, wire};
}

void Trainer::describe(const Log& log) {
  const int64_t lb = deck_.data.batch_size / grid_->data_size(), t_len = deck_.model.seq_len;
  if (opts_.probe_gemm)
    gemm_gflops_ = measure_gemm_gflops(std::min<int64_t>(lb * t_len, 2048), deck_.model.n_embd, 4 * deck_.model.n_embd,
                                       0.3, tp_.precision);
  if (!std::getenv("OPENBLAS_NUM_THREADS") && grid_->world_size() > 1)
    log.warn("OPENBLAS_NUM_THREADS is not set: each rank's OpenBLAS may start one thread per core and oversubscribe");
  log.info(strfmt("strata: GPT %lld layers, C=%lld, %lld heads, vocab %lld, T=%lld: %.2fM parameters; %s data%s",
                  (long long)deck_.model.n_layer, (long long)deck_.model.n_embd, (long long)deck_.model.n_head,
                  (long long)deck_.model.vocab_size, (long long)t_len, double(model_->params().global_numel()) / 1e6,
                  deck_.data.kind.c_str(),
                  tp_.precision == Precision::BF16 ? "; bf16 products (linear layers, attention, LM head), fp32 masters" : ""));
  if (const std::string data = data_->describe(); !data.empty()) log.info("strata: data: " + data);
  const std::string blas = blas_core_name();
  const std::string& run_dir = loop_->run_dir();
  log.info(strfmt("strata: %d ranks (%s; data-parallel %s collectives), global batch %lld x %lld tokens, %lld steps; gemm probe %.1f GFLOP/s per rank%s%s%s",
                  grid_->world_size(), layout().c_str(), deck_.parallel.comm_backend.c_str(),
                  (long long)deck_.data.batch_size, (long long)t_len, (long long)deck_.run.steps, gemm_gflops_,
                  tp_.precision == Precision::BF16 ? " in bf16" : "", blas.empty() ? "" : (" (OpenBLAS " + blas + " kernels)").c_str(),
                  run_dir.empty() ? "" : ("; run dir " + run_dir).c_str()));
}

Evaluation Trainer::evaluate() {
  Batch& batch = *batches_.front();
  double sum = 0;
  for (int64_t j = 0; j < deck_.run.val_batches; ++j) {
    batch.load(*data_, Split::Validation, j, grid_->data_rank(), grid_->data_size(), deck_.parallel.micro_batches);
    sum += engine_->evaluate(samples_of(batch), deck_.data.batch_size).loss;
  }
  Evaluation e;
  e.loss = sum / double(deck_.run.val_batches);
  // the text the validation targets stand for: the same global sequences at every
  // evaluation and on every rank, counted once
  const int64_t t_len = deck_.model.seq_len;
  if (val_text_bytes_ == 0) {
    std::vector<int32_t> tok(static_cast<size_t>(t_len)), tgt(static_cast<size_t>(t_len));
    for (int64_t j = 0; j < deck_.run.val_batches; ++j)
      for (int64_t i = 0; i < deck_.data.batch_size; ++i) {
        data_->sequence(Split::Validation, j, i, t_len, tok.data(), tgt.data());
        val_text_bytes_ += data_->text_bytes(tgt.data(), t_len);
      }
  }
  const double tokens = double(deck_.run.val_batches * deck_.data.batch_size * t_len);
  e.bits_per_byte = e.loss * tokens / (val_text_bytes_ * std::log(2.0));  // NaN when the bytes are not known
  return e;
}

std::vector<StepOutcome> Trainer::train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update,
                                              Timers& timers, const std::function<bool()>& stop_requested) {
  timers.start("data");
  while (int64_t(batches_.size()) < count)
    batches_.push_back(std::make_unique<Batch>(batches_.front()->local_batch(), deck_.model.seq_len));
  std::vector<SampleBatch<float>> views;
  for (int64_t k = 0; k < count; ++k) {
    batches_[k]->load(*data_, Split::Train, first_step + k, grid_->data_rank(), grid_->data_size(),
                      deck_.parallel.micro_batches);
    views.push_back(samples_of(*batches_[k]));
  }
  timers.stop("data");
  return engine_->train_steps(first_step, views, deck_.data.batch_size, update, timers, stop_requested);
}

std::vector<std::string> Trainer::metric_columns() const {
  return {"val_loss", "val_bpb", "lr", "grad_norm", "ms_per_step", "tokens_per_s", "gflops_per_s", "peak_rss_mib"};
}

std::string Trainer::progress(const ProgressWindow& w, std::vector<double>& row) {
  const double dt = w.seconds / double(w.window_steps);
  const double tok_s = double(samples_per_step()) / dt;
  const double gflops = model_->flops_per_token() * double(samples_per_step()) / dt / 1e9;
  const double mem_mib = double(peak_rss_bytes()) / (1 << 20);
  std::string line;
  if (!std::isnan(w.val.loss)) line += strfmt(" | val %.4f", w.val.loss);
  if (!std::isnan(w.val.bits_per_byte)) line += strfmt(" (%.4f bits/byte)", w.val.bits_per_byte);
  line += strfmt(" | lr %.2e | norm %.3f | %.0f tok/s | %.1f ms/step | %.1f GFLOP/s", w.lr, w.last.grad_norm, tok_s,
                 dt * 1e3, gflops);
  const int world = grid_->world_size();
  if (gemm_gflops_ > 0) line += strfmt(" (%.0f%% of gemm)", 100.0 * gflops / (gemm_gflops_ * double(world)));
  // this rank's communication: share of the step time (validation excluded), volume per step
  if (world > 1)
    line += strfmt(" | comm %.0f%% %.2f MiB/step", 100.0 * std::min(w.comm_seconds / w.seconds, 1.0),
                   w.comm_bytes / double(w.window_steps) / double(1 << 20));
  row.insert(row.end(), {w.val.loss, w.val.bits_per_byte, w.lr, w.last.grad_norm, dt * 1e3, tok_s, gflops, mem_mib});
  return line;
}

std::string Trainer::done_line(int64_t steps_run, double seconds, double last_loss) const {
  return strfmt(", %.0f tokens/s, final loss %.4f", double(samples_per_step()) * double(steps_run) / std::max(seconds, 1e-9),
                last_loss);
}

GptTrainResult Trainer::run() {
  std::unique_ptr<TraceRecorder> trace;
  if (!opts_.trace.empty()) {
    barrier(grid_->world());  // every rank's time 0 at the same moment
    trace = std::make_unique<TraceRecorder>(Timers::now());
    loop_->timers().set_trace(trace.get());
  }
  GptTrainResult result;
  static_cast<TrainResult&>(result) = loop_->run();
  if (trace) {
    loop_->timers().set_trace(nullptr);
    const auto& g = grid_->coords();
    write_chrome_trace(opts_.trace, grid_->world(), *trace,
                       strfmt("rank %d (data %d, stage %d, tensor %d,%d)", grid_->world_rank(), g.data, g.pipeline,
                              g.row, g.col));
    log_.info("strata: wrote the timeline of every rank to " + opts_.trace + " (tools/plot_trace.py draws it)");
  }
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
    s.passes = int64_t(grid_->everyone().allreduce_sum(here ? double(mine.passes) : 0.0));
    s.ahead = int64_t(grid_->everyone().allreduce_sum(here ? double(mine.ahead) : 0.0));
    s.sum_used = grid_->everyone().allreduce_sum(here ? mine.sum_used : 0.0);
    s.sum_current = grid_->everyone().allreduce_sum(here ? mine.sum_current : 0.0);
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

void Trainer::print_summary(const Log& log, double loop, int64_t steps_run) {
  if (grid_->world_size() == 1) return;
  const auto [comm_s, comm_wire] = comm_totals();
  log.info(strfmt("communication (rank 0): %.3f s = %.1f%% of the loop, %.3f MiB/step sent (bandwidth-optimal count)",
                  comm_s, 100.0 * comm_s / loop, comm_wire / double(std::max<int64_t>(1, steps_run)) / (1 << 20)));
  log.info("comm group    kind                 calls  payload_MiB   wire_MiB    seconds");
  for (const auto& [group, c] : grid_->reported_comms())
    for (const auto& [kind, st] : c->stats())
      if (st.calls > 0 && (st.bytes > 0 || st.seconds > 1e-4))
        log.info(strfmt("comm %-8s %-20s %7lld %12.2f %10.2f %10.3f", group.c_str(), kind.c_str(), (long long)st.calls,
                        double(st.bytes) / (1 << 20), st.wire_bytes / (1 << 20), st.seconds));
}

}  // namespace strata
