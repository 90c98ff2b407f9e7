#include "model/make_model.hpp"

#include <stdexcept>

#include "core/blas_library.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/gemm_probe.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/gpt.hpp"
#include "model/resnet.hpp"
#include "model/run_metrics.hpp"
#include "model/softmax_regression.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {
namespace {

std::unique_ptr<StageModel<float>> make_gpt(const Deck& deck, const TensorParallel& tp, const ContextParallel& cp,
                                            const ExpertParallel& ep, int stage, bool allocate) {
  const auto& par = deck.parallel;
  const auto placement =
      StagePlacement::interleaved(int(deck.model.n_layer), int(par.pipeline),
                                  par.schedule == Schedule::Interleaved ? int(par.virtual_stages) : 1, stage);
  return std::make_unique<GPT<float>>(deck.model, deck.run.seed, tp, placement, par.recompute, allocate, cp, ep);
}

std::unique_ptr<StageModel<float>> make_resnet(const Deck& deck, int stage, const DataShape& data) {
  ResNetConfig rc;
  rc.inputs = data.features;
  rc.width = deck.model.width;
  rc.channels = deck.model.channels;
  rc.steps = deck.model.steps;
  rc.classes = data.classes;
  rc.t_final = deck.model.t_final;
  rc.init_std = deck.model.init_std;
  rc.step_init_std = deck.model.step_init_std;
  rc.precision = deck.model.precision;
  rc.recompute_states = deck.parallel.recompute == Recompute::Full;
  return std::make_unique<ResNet<float>>(rc, deck.run.seed,
                                         StagePlacement::balanced(int(rc.steps), int(deck.parallel.pipeline), stage));
}

RunDescription describe_gpt(const Deck& deck, GPT<float>& gpt, const RunSetting& run) {
  const auto& m = deck.model;
  const int64_t gb = deck.data.batch_size;
  RunDescription d;
  d.samples_per_step = gb * m.seq_len;
  const double gemm = run.probe_gemm ? measure_gemm_gflops(std::min<int64_t>(gb / run.data_ranks * m.seq_len, 2048),
                                                           m.n_embd, 4 * m.n_embd, 0.3, m.precision)
                                     : 0.0;
  d.metrics = std::make_unique<LanguageModelMetrics>(d.samples_per_step, gpt.flops_per_token(), gemm, run.ranks,
                                                     m.moe_experts > 0 ? &gpt : nullptr);
  const bool bf16 = m.precision == Precision::BF16;
  d.lines.push_back(
      strfmt("strata: GPT %lld layers, C=%lld, %lld heads, vocab %lld%s, T=%lld: %.2fM parameters; %s data%s",
             (long long)m.n_layer, (long long)m.n_embd, (long long)m.n_head, (long long)m.vocab_size,
             m.vocab_rows() > m.vocab_size ? strfmt(" (padded to %lld)", (long long)m.vocab_rows()).c_str() : "",
             (long long)m.seq_len, double(gpt.params().global_numel()) / 1e6, to_string(deck.data.kind).c_str(),
             bf16 ? "; bf16 products (linear layers, attention, LM head), fp32 masters" : ""));
  if (m.moe_experts > 0) {
    int64_t experts = 0, layers = 0;  // the experts' parameters, the mixture layers
    for (const auto& p : gpt.params().infos()) experts += p.expert ? p.global_numel : 0;
    for (int64_t l = 0; l < m.n_layer; ++l) layers += m.moe_block(l) ? 1 : 0;
    d.lines.push_back(
        strfmt("strata: mixture of experts in %lld of %lld blocks: %lld experts of hidden width %lld, top %lld, %s; "
               "%.2fM expert parameters (%.2fM active per token); experts over %lld ranks",
               (long long)layers, (long long)m.n_layer, (long long)m.moe_experts, (long long)m.expert_hidden(),
               (long long)m.moe_top_k,
               m.moe_capacity_factor > 0 ? strfmt("capacity factor %g", m.moe_capacity_factor).c_str() : "dropless",
               double(experts) / 1e6, double(experts) * double(m.moe_top_k) / double(m.moe_experts) / 1e6,
               (long long)deck.parallel.expert));
  }
  if (!run.data_line.empty()) d.lines.push_back("strata: data: " + run.data_line);
  const std::string blas = blas_core_name();
  d.lines.push_back(strfmt(
      "strata: %d ranks (%s; data-parallel %s collectives), global batch %lld x %lld tokens, %lld steps; gemm probe "
      "%.1f GFLOP/s per rank%s%s",
      run.ranks, run.layout.c_str(), to_string(deck.parallel.comm_backend).c_str(), (long long)gb, (long long)m.seq_len,
      (long long)deck.run.steps, gemm, bf16 ? " in bf16" : "",
      blas.empty() ? "" : (" (OpenBLAS " + blas + " kernels)").c_str()));
  return d;
}

// An image classifier's description: its model line, then the ranks' line; samples per
// step are images, validated at the end.
RunDescription describe_classifier(const Deck& deck, const RunSetting& run, const std::string& model_line) {
  const int64_t gb = deck.data.batch_size;
  RunDescription d;
  d.samples_per_step = gb;
  d.validates_at_end = true;
  d.metrics = std::make_unique<ClassifierMetrics>(gb);
  d.lines.push_back(model_line);
  d.lines.push_back(strfmt("strata: %d ranks (%s), global batch %lld, %lld steps", run.ranks, run.layout.c_str(),
                           (long long)gb, (long long)deck.run.steps));
  return d;
}

RunDescription describe_resnet(const Deck& deck, const ResNet<float>& resnet, const RunSetting& run) {
  const auto& cfg = resnet.config();
  return describe_classifier(
      deck, run,
      strfmt("strata: ResNet %lld %s steps (T = %g), %lld -> %lld classes: %.3fM parameters; %s", (long long)cfg.steps,
             cfg.channels > 0 ? strfmt("3x3-convolution %lld-channel", (long long)cfg.channels).c_str()
                              : strfmt("dense width-%lld", (long long)cfg.width).c_str(),
             cfg.t_final, (long long)cfg.inputs, (long long)cfg.classes, double(resnet.params().global_numel()) / 1e6,
             run.data_line.c_str()));
}

std::unique_ptr<StageModel<float>> make_softmax(const Deck& deck, const DataShape& data) {
  SoftmaxRegressionConfig c;
  c.inputs = data.features;
  c.classes = data.classes;
  c.init_std = deck.model.init_std;
  c.precision = deck.model.precision;
  return std::make_unique<SoftmaxRegression<float>>(c, deck.run.seed);
}

RunDescription describe_softmax(const Deck& deck, const SoftmaxRegression<float>& model, const RunSetting& run) {
  const auto& cfg = model.config();
  return describe_classifier(
      deck, run,
      strfmt("strata: softmax regression, %lld -> %lld classes: %lld parameters; %s", (long long)cfg.inputs,
             (long long)cfg.classes, (long long)model.params().global_numel(), run.data_line.c_str()));
}

}  // namespace

RunDescription describe_model(const Deck& deck, StageModel<float>& model, const RunSetting& run) {
  // the kind make_model built for this deck
  switch (deck.model.kind) {
    case ModelKind::ResNet:
      return describe_resnet(deck, static_cast<const ResNet<float>&>(model), run);
    case ModelKind::Softmax:
      return describe_softmax(deck, static_cast<const SoftmaxRegression<float>&>(model), run);
    case ModelKind::GPT:
      break;
  }
  return describe_gpt(deck, static_cast<GPT<float>&>(model), run);
}

std::vector<std::array<int64_t, 3>> model_product_shapes(const Deck& d) {
  const auto& m = d.model;
  const int64_t rows_per_replica = d.data.batch_size / d.parallel.data;
  switch (m.kind) {
    case ModelKind::ResNet:
      return {{rows_per_replica, 784, m.width}, {rows_per_replica, m.width, m.width}, {rows_per_replica, m.width, 10}};
    case ModelKind::Softmax:
      return {{rows_per_replica, 784, 10}};
    case ModelKind::GPT:
      break;
  }
  const int64_t rows = std::min<int64_t>(rows_per_replica * m.seq_len, 2048), c = m.n_embd;
  return {{rows, c, 3 * c}, {rows, c, c}, {rows, c, 4 * c}, {rows, 4 * c, c}, {rows, c, m.vocab_rows()}};
}

void require_precision_runs(Precision precision) {
  if (precision == Precision::BF16)
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty())
      throw UserError("model.precision = \"bf16\" cannot run here: " + why + " (use \"fp32\")");
}

std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const TensorParallel& tp, int stage,
                                              const DataShape& data, bool allocate, const ContextParallel& cp,
                                              const ExpertParallel& ep) {
  std::unique_ptr<StageModel<float>> model;
  if (deck.model.kind != ModelKind::GPT && !allocate)
    throw std::logic_error("make_model: only the GPT has a dry model");
  if (deck.model.kind == ModelKind::ResNet) {
    model = make_resnet(deck, stage, data);
  } else if (deck.model.kind == ModelKind::Softmax) {
    model = make_softmax(deck, data);
  } else {
    model = make_gpt(deck, tp, cp, ep, stage, allocate);
  }
  if (allocate) {
    if (keeps_rounded_copy(deck)) model->params().keep_rounded_copy();
  }
  return model;
}

bool keeps_rounded_copy(const Deck& deck) {
  return deck.model.precision == Precision::BF16 && deck.model.bf16_round_once &&
         ParamStore<float>::rounded_copy_pays();
}

std::unique_ptr<GPT<float>> as_gpt(std::unique_ptr<StageModel<float>> model) {
  auto* gpt = dynamic_cast<GPT<float>*>(model.get());
  if (!gpt) throw std::logic_error("as_gpt: the model is not a GPT");
  model.release();
  return std::unique_ptr<GPT<float>>(gpt);
}

std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const Grid& grid, const DataShape& data) {
  require_precision_runs(deck.model.precision);
  std::unique_ptr<StageModel<float>> model = make_model(deck, tensor_parallel_of(grid), grid.coords().pipeline, data,
                                                        true, context_parallel_of(grid), expert_parallel_of(grid));
  // parallel.zero = 1 with more than one replica: this rank keeps the AdamW moments of its
  // replica's block only (optim/zero_sharding.hpp), before any step or checkpoint read
  // (with expert parallelism the experts' moments over the expert replicas)
  if (deck.parallel.zero > 0 && grid.replicas().size() > 1) {
    const bool experts = grid.shape().expert > 1;
    model->params().shard_moments(grid.replicas().size(), grid.replicas().rank(),
                                  experts ? grid.expert_replicas().size() : 0,
                                  experts ? grid.expert_replicas().rank() : 0);
  }
  return model;
}

}  // namespace strata
