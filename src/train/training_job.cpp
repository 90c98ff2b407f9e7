#include "train/training_job.hpp"

#include <algorithm>
#include <cmath>

#include "comm/agree.hpp"
#include "core/blas_kernels.hpp"
#include "engine/make_engine.hpp"
#include "kernels/gemm_probe.hpp"
#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "model/resnet.hpp"
#include "train/deck_data.hpp"

namespace strata {

TrainingJob::TrainingJob(const Deck& deck, MPI_Comm world, const JobOptions& options) : deck_(deck) {
  const auto& par = deck_.parallel;
  agreed(world, [&] {
    grid_ = std::make_unique<Grid>(par, world);
    require_precision_runs(deck_.model.precision);
  });
  agreed(world, [&] {
    data_ = make_batch_source(deck_, *grid_);
    if (deck_.data.kind == DataKind::Tokens)
      if (const auto tok = deck_tokenizer(deck_)) facts_.tokenizer_model = tok->serialized();
  });
  agreed(world, [&] { model_ = make_model(deck_, *grid_, data_->shape()); });
  agreed(world, [&] {
    if (par.measure_staleness) staleness_ = std::make_unique<StalenessMeter<float>>();
    engine_ = make_engine(deck_, *grid_, *model_, staleness_.get());
  });
  describe(options);
}

TrainingJob::~TrainingJob() = default;

void TrainingJob::describe(const JobOptions& options) {
  const auto& m = deck_.model;
  const int64_t gb = deck_.data.batch_size;
  const double params_m = double(model_->params().global_numel()) / 1e6;
  facts_.layout = layout_name(deck_.parallel);
  facts_.max_round_steps = engine_->max_steps_per_call();
  const std::string data_line = data_->describe();
  if (const auto* gpt = dynamic_cast<const GPT<float>*>(model_.get())) {
    facts_.samples_per_step = gb * m.seq_len;
    const double gemm =
        options.probe_gemm
            ? measure_gemm_gflops(std::min<int64_t>(gb / grid_->data_size() * m.seq_len, 2048), m.n_embd, 4 * m.n_embd,
                                  0.3, m.precision)
            : 0.0;
    metrics_ = std::make_unique<LanguageModelMetrics>(facts_.samples_per_step, gpt->flops_per_token(), gemm,
                                                      grid_->world_size(),
                                                      m.moe_experts > 0 ? dynamic_cast<GPT<float>*>(model_.get()) : nullptr);
    const bool bf16 = m.precision == Precision::BF16;
    facts_.description.push_back(
        strfmt("strata: GPT %lld layers, C=%lld, %lld heads, vocab %lld%s, T=%lld: %.2fM parameters; %s data%s",
               (long long)m.n_layer, (long long)m.n_embd, (long long)m.n_head, (long long)m.vocab_size,
               m.vocab_rows() > m.vocab_size ? strfmt(" (padded to %lld)", (long long)m.vocab_rows()).c_str() : "",
               (long long)m.seq_len, params_m, to_string(deck_.data.kind).c_str(),
               bf16 ? "; bf16 products (linear layers, attention, LM head), fp32 masters" : ""));
    if (m.moe_experts > 0) {
      int64_t experts = 0, layers = 0;  // the experts' parameters, the mixture layers
      for (const auto& p : model_->params().infos()) experts += p.expert ? p.global_numel : 0;
      for (int64_t l = 0; l < m.n_layer; ++l) layers += m.moe_block(l) ? 1 : 0;
      facts_.description.push_back(strfmt(
          "strata: mixture of experts in %lld of %lld blocks: %lld experts of hidden width %lld, top %lld, %s; "
          "%.2fM expert parameters (%.2fM active per token); experts over %lld ranks",
          (long long)layers, (long long)m.n_layer, (long long)m.moe_experts, (long long)m.expert_hidden(),
          (long long)m.moe_top_k,
          m.moe_capacity_factor > 0 ? strfmt("capacity factor %g", m.moe_capacity_factor).c_str() : "dropless",
          double(experts) / 1e6, double(experts) * double(m.moe_top_k) / double(m.moe_experts) / 1e6,
          (long long)deck_.parallel.expert));
    }
    if (!data_line.empty()) facts_.description.push_back("strata: data: " + data_line);
    const std::string blas = blas_core_name();
    facts_.description.push_back(strfmt(
        "strata: %d ranks (%s; data-parallel %s collectives), global batch %lld x %lld tokens, %lld steps; gemm probe "
        "%.1f GFLOP/s per rank%s%s",
        grid_->world_size(), facts_.layout.c_str(), to_string(deck_.parallel.comm_backend).c_str(), (long long)gb,
        (long long)m.seq_len, (long long)deck_.run.steps, gemm, bf16 ? " in bf16" : "",
        blas.empty() ? "" : (" (OpenBLAS " + blas + " kernels)").c_str()));
    return;
  }
  const auto& resnet = dynamic_cast<const ResNet<float>&>(*model_);
  const auto& cfg = resnet.config();
  const auto* mgrit = dynamic_cast<const LayerParallel<float>*>(engine_.get());
  if (mgrit) {
    const auto& lp = deck_.layerpar;
    facts_.layout += strfmt(" L=%lld c=%lld %s %lld/%lld", (long long)lp.levels, (long long)lp.cfactor,
                            to_string(lp.relaxation).c_str(), (long long)lp.fwd_iterations, (long long)lp.bwd_iterations);
  }
  facts_.samples_per_step = gb;
  facts_.validates_at_end = true;
  metrics_ = std::make_unique<ClassifierMetrics>(gb, mgrit);
  facts_.description.push_back(strfmt(
      "strata: ResNet %lld %s steps (T = %g), %lld -> %lld classes: %.3fM parameters; %s", (long long)cfg.steps,
      cfg.channels > 0 ? strfmt("3x3-convolution %lld-channel", (long long)cfg.channels).c_str()
                       : strfmt("dense width-%lld", (long long)cfg.width).c_str(),
      cfg.t_final, (long long)cfg.inputs, (long long)cfg.classes, params_m, data_line.c_str()));
  facts_.description.push_back(strfmt("strata: %d ranks (%s), global batch %lld, %lld steps", grid_->world_size(),
                                      facts_.layout.c_str(), (long long)gb, (long long)deck_.run.steps));
}

std::vector<StepOutcome> TrainingJob::train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update,
                                                  Timers& timers, const std::function<bool()>& stop_requested) {
  // MGRIT's warm start is not in a checkpoint: after a restart the first solves start
  // from zero, so the uninterrupted run's start from zero after every checkpoint_every-th step
  const int64_t every = deck_.run.checkpoint_every;
  if (auto* mgrit = dynamic_cast<LayerParallel<float>*>(engine_.get()))
    if (every > 0 && first_step > 0 && first_step % every == 0) mgrit->cold_start();
  timers.start("data");
  std::vector<SampleBatch<float>> batches;
  for (int64_t k = 0; k < count; ++k) batches.push_back(data_->load(Split::Train, first_step + k, int(k)));
  timers.stop("data");
  return engine_->train_steps(first_step, batches, deck_.data.batch_size, update, timers, stop_requested);
}

Evaluation TrainingJob::evaluate() {
  const int64_t gb = deck_.data.batch_size, batches = deck_.run.val_batches;
  double loss = 0, correct = 0;
  for (int64_t j = 0; j < batches; ++j) {
    const BatchResult r = engine_->evaluate(data_->load(Split::Validation, j, 0), gb);
    loss += r.loss;
    correct += double(r.correct);
  }
  Evaluation e;
  e.loss = loss / double(batches);
  if (facts_.validates_at_end) e.accuracy = correct / double(batches * gb);  // a classifier
  // the text the validation targets stand for: the same global sequences at every
  // evaluation and on every rank, counted once
  if (val_text_bytes_ == 0) val_text_bytes_ = data_->text_bytes(Split::Validation, batches);
  const double samples = double(batches) * double(facts_.samples_per_step);
  e.bits_per_byte = e.loss * samples / (val_text_bytes_ * std::log(2.0));  // NaN when the bytes are not known
  return e;
}

void TrainingJob::report_end(const Log& log, TrainResult& result) {
  if (!staleness_) return;
  // one rank per stage reports (data replica 0, tensor coordinates 0,0); the others add zeros
  const auto& g = grid_->coords();
  const bool reports = g.data == 0 && g.row == 0 && g.col == 0;
  const auto& mine = staleness_->summary();
  const bool predicted = deck_.parallel.weight_prediction;
  log.info(std::string("xpipe staleness: mean |W - W_target| / |W_target| over the passes with s > 0, ") +
           (predicted ? "the predicted weights each pass ran on and the current ones"
                      : "the current weights each pass ran on (no prediction)"));
  result.staleness.assign(size_t(deck_.parallel.pipeline), {});
  for (int stage = 0; stage < int(result.staleness.size()); ++stage) {
    const bool here = reports && g.pipeline == stage;
    auto& s = result.staleness[size_t(stage)];
    s.passes = int64_t(grid_->everyone().allreduce_sum(here ? double(mine.passes) : 0.0));
    s.ahead = int64_t(grid_->everyone().allreduce_sum(here ? double(mine.ahead) : 0.0));
    s.sum_used = grid_->everyone().allreduce_sum(here ? mine.sum_used : 0.0);
    s.sum_current = grid_->everyone().allreduce_sum(here ? mine.sum_current : 0.0);
    if (predicted)
      log.info(strfmt("xpipe staleness stage %d: %lld of %lld passes with s > 0: predicted %.3e, current %.3e (ratio %.2f)",
                      stage, (long long)s.ahead, (long long)s.passes, s.mean_used(), s.mean_current(),
                      s.mean_current() > 0 ? s.mean_used() / s.mean_current() : 0.0));
    else
      log.info(strfmt("xpipe staleness stage %d: %lld of %lld passes with s > 0: current %.3e", stage,
                      (long long)s.ahead, (long long)s.passes, s.mean_current()));
  }
}

}  // namespace strata
