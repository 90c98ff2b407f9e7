// model.kind = "gpt": the decoder-only transformer (gpt.hpp), its deck rules, how it is
// built on a rank and how a run describes it.
#include <algorithm>

#include "core/blas_library.hpp"
#include "core/deck_key_builders.hpp"
#include "core/log.hpp"
#include "model/gpt.hpp"
#include "model/gpt_layer_steps.hpp"
#include "model/make_model.hpp"
#include "model/model_kind.hpp"
#include "parallel/tensor_parallel.hpp"
#include "report/run_metrics.hpp"

namespace strata {
namespace {

// A key of the GPT's: every other kind refuses it (the residual network is told its own
// key for the same thing, resnet_key, where it has one).
DeckKey gpt_key(DeckKey k, const std::string& resnet_key = "") {
  return deck_key_builders::for_kind(std::move(k), "gpt", "the GPT", "resnet", resnet_key);
}

bool has_experts(const Deck& d) { return d.model.moe_experts > 0; }
constexpr const char* kNeedsExperts = "model.moe_experts > 0 (a mixture of experts)";

// The GPT's deck keys: its shape, the mixture of experts, MGRIT's serial buffers.
DeckKeys gpt_deck_keys() {
  using namespace deck_key_builders;
  using D = Deck;
  const char* model = "model";
  const char* lp = "layerpar";
  const char* opt = "optim";
  return {
      gpt_key(key(model, &D::model, "n_layer", &ModelConfig::n_layer, at_least<int64_t>(1),
                  "gpt: transformer blocks (at least parallel.pipeline)"),
              "steps"),
      gpt_key(key(model, &D::model, "n_embd", &ModelConfig::n_embd, at_least<int64_t>(1),
                  "gpt: width C (a multiple of n_head)"),
              "width"),
      gpt_key(key(model, &D::model, "n_head", &ModelConfig::n_head, at_least<int64_t>(1), "gpt: attention heads")),
      gpt_key(key(model, &D::model, "vocab_size", &ModelConfig::vocab_size, at_least<int64_t>(2),
                  "gpt: vocabulary size V (at least 256 for byte-level text)")),
      gpt_key(key(model, &D::model, "seq_len", &ModelConfig::seq_len, at_least<int64_t>(1),
                  "gpt: context length T (also the position table's size)")),
      gpt_key(key(model, &D::model, "padded_vocab_size", &ModelConfig::padded_vocab_size, at_least<int64_t>(0),
                  "gpt: rows of the token embedding (and logits) when more than vocab_size, as llm.c pads GPT-2's "
                  "50257 to 50304: the padded rows start at zero, their logits are left out of the softmax and never "
                  "sampled, and they make the vocabulary divisible by a tensor split (0: vocab_size, no padding)")),
      gpt_key(key(model, &D::model, "moe_experts", &ModelConfig::moe_experts, at_least<int64_t>(0),
                  "gpt: experts E of a mixture-of-experts MLP (0: every MLP dense); a router sends each token to "
                  "moe_top_k of them")),
      acts_when(
          gpt_key(key(model, &D::model, "moe_top_k", &ModelConfig::moe_top_k, from_to(1, 2),
                      "gpt: experts per token (1: the router's probability weighs the expert's output, as Switch does; "
                      "2: the two probabilities renormalised to sum to 1)")),
          has_experts, kNeedsExperts),
      acts_when(
          gpt_key(key(model, &D::model, "moe_every", &ModelConfig::moe_every, at_least<int64_t>(1),
                      "gpt: every moe_every-th block (blocks moe_every - 1, 2 moe_every - 1, ... from 0) has a mixture "
                      "of experts for its MLP, the others a dense MLP")),
          has_experts, kNeedsExperts),
      acts_when(gpt_key(key(model, &D::model, "moe_capacity_factor", &ModelConfig::moe_capacity_factor, at_least(0.0),
                            "gpt: an expert takes at most ceil(factor x tokens x top_k / E) of a global micro-batch's "
                            "assignments, first choices before second ones, then by position in the global batch; the "
                            "others are dropped (the token's residual passes on); 0: dropless")),
                has_experts, kNeedsExperts),
      acts_when(gpt_key(key(model, &D::model, "moe_ffn_hidden", &ModelConfig::moe_ffn_hidden, at_least<int64_t>(0),
                            "gpt: an expert's hidden width (0: 4 x n_embd, the dense MLP's)")),
                has_experts, kNeedsExperts),
      acts_when(
          gpt_key(key(
              lp, &D::layerpar, "buffer_open", &LayerParConfig::buffer_open, at_least<int64_t>(0),
              "gpt: the first blocks, run serially with the embedding on the first layer rank before the MGRIT steps")),
          is_mgrit, kNeedsMgrit),
      acts_when(
          gpt_key(key(lp, &D::layerpar, "buffer_close", &LayerParConfig::buffer_close, at_least<int64_t>(0),
                      "gpt: the last blocks, run serially with the head on the last layer rank after the MGRIT steps")),
          is_mgrit, kNeedsMgrit),
      acts_when(
          gpt_key(
              key(opt, &D::model, "moe_aux_loss", &ModelConfig::moe_aux_loss, at_least(0.0),
                  "gpt with model.moe_experts: the load-balancing loss alpha E sum_i f_i P_i of every mixture layer "
                  "(Switch Transformer; f_i the share of a global micro-batch's assignments to expert i, P_i its mean "
                  "router probability), averaged over the micro-batches")),
          has_experts, kNeedsExperts),
      acts_when(
          gpt_key(key(opt, &D::model, "moe_z_loss", &ModelConfig::moe_z_loss, at_least(0.0),
                      "gpt with model.moe_experts: the router z-loss beta mean(logsumexp(router logits)^2) (ST-MoE)")),
          has_experts, kNeedsExperts),
  };
}

// parallel.schedule = "mgrit" (gpt_layer_steps.hpp): the buffers leave steps for every
// layer rank, the levels fit them, and the splits it does not run with are refused.
void check_gpt_layer_steps(const Deck& d, const DeckRule& rule) {
  const auto& p = d.parallel;
  const auto& m = d.model;
  const auto& lp = d.layerpar;
  const int64_t steps = m.n_layer - lp.buffer_open - lp.buffer_close;
  rule(steps >= 1,
       "layerpar.buffer_open + buffer_close (" + std::to_string(lp.buffer_open + lp.buffer_close) +
           ") of model.n_layer (" + std::to_string(m.n_layer) + ")",
       "leave no block for the MGRIT steps");
  const std::string what =
      "the MGRIT steps (" + std::to_string(steps) + " = model.n_layer less layerpar.buffer_open and buffer_close)";
  rule(steps >= p.pipeline, what,
       "must be at least the layer ranks, parallel.pipeline (" + std::to_string(p.pipeline) +
           "): every layer rank holds at least one step");
  check_mgrit_steps(d, steps, what, rule);
  const std::string refused = "does not run with schedule = \"mgrit\": ";
  const TensorParallel split = tensor_split_of(p);
  rule(split.size() == 1 || split.traits().whole_activations, "parallel.tensor_mode",
       "= \"" + to_string(p.tensor_mode) + "\"" + (p.sequence_parallel ? " with sequence_parallel" : "") + " " +
           refused +
           "the solver's states are whole (B T, C) residual streams, which only the 1D split without sequence "
           "parallelism keeps whole on every tensor rank");
  rule(p.context == 1, "parallel.context",
       refused +
           "a state would be a chunk of each sequence, and every step's "
           "attention a ring exchange inside the solver");
  rule(m.moe_experts == 0, "model.moe_experts",
       refused +
           "a coarse step scales each branch, and a mixture's routing and capacity are not a function a "
           "step can scale");
}

// The splits must divide what they split: heads, widths, vocabulary, tokens, experts.
void check_gpt(const Deck& d, const DeckRule& rule) {
  const auto& p = d.parallel;
  const auto& m = d.model;
  const auto need = [&](int64_t value, const std::string& what, int64_t by, const std::string& why) {
    rule(value % by == 0, what,
         "(" + std::to_string(value) + ") must be divisible by " + why + " (" + std::to_string(by) + ")");
  };
  rule(d.data.kind != DataKind::Text || m.vocab_size >= 256, "data.kind",
       "\"text\" is byte-level and needs model.vocab_size >= 256");
  const TensorParallel split = tensor_split_of(p);
  const SplitDivisions by = split.divisions();
  rule(m.moe_experts == 0 || by.refuses_experts.empty(), "model.moe_experts", by.refuses_experts);
  rule(m.n_embd % m.n_head == 0, "model.n_embd",
       "(" + std::to_string(m.n_embd) + ") must be a positive multiple of model.n_head (" + std::to_string(m.n_head) +
           ")");
  rule(m.padded_vocab_size == 0 || m.padded_vocab_size >= m.vocab_size, "model.padded_vocab_size",
       "(" + std::to_string(m.padded_vocab_size) + ") must be 0 or at least model.vocab_size (" +
           std::to_string(m.vocab_size) + ")");
  const char* vocab_key = m.padded_vocab_size > m.vocab_size ? "model.padded_vocab_size" : "model.vocab_size";
  const auto divide = [&](int64_t value, const std::string& what, const Division& d) {
    if (d.by > 1) need(value, what, d.by, d.why);
  };
  divide(m.n_head, "model.n_head", by.heads);
  for (const WidthDivision& w : by.width)
    divide(w.times * m.n_embd, w.times == 1 ? "model.n_embd" : std::to_string(w.times) + " x model.n_embd", w.d);
  divide(m.vocab_rows(), vocab_key, by.vocab);
  divide(d.data.batch_size / p.data / p.micro_batches, "data.batch_size / parallel.data / parallel.micro_batches",
         by.batch);
  if (p.context > 1 && p.context_mode == ContextMode::AllToAll) {
    const int64_t heads = m.n_head / by.heads.by;
    rule(heads % p.context == 0,
         "the heads a tensor rank holds (model.n_head / " + by.heads_name +
             " = " + std::to_string(heads) + ")",
         "must be divisible by parallel.context (" + std::to_string(p.context) +
             ") for context_mode = \"all-to-all\": each rank takes 1/context of them over whole sequences");
  }
  rule(p.context == 1 || m.seq_len % (2 * p.context) == 0, "model.seq_len",
       "(" + std::to_string(m.seq_len) + ") must be divisible by 2 x parallel.context (" +
           std::to_string(2 * p.context) +
           "): each context rank holds two of the 2 x context chunks of every sequence");
  const std::string tokens_per_rank =
      "a micro-batch's tokens per rank (data.batch_size / parallel.data / parallel.micro_batches x model.seq_len / "
      "parallel.context)";
  const int64_t tokens = d.data.batch_size / p.data / p.micro_batches * (m.seq_len / p.context);
  if (p.sequence_parallel) need(tokens, tokens_per_rank, p.tensor_cols, "parallel.tensor_cols for sequence_parallel");
  rule(m.moe_experts == 0 || m.moe_top_k <= m.moe_experts, "model.moe_top_k",
       "(" + std::to_string(m.moe_top_k) + ") must be at most model.moe_experts (" + std::to_string(m.moe_experts) +
           ")");
  if (p.expert > 1) {
    need(p.data, "parallel.data", p.expert, "parallel.expert (the expert ranks are taken from the data group)");
    need(m.moe_experts, "model.moe_experts", p.expert, "parallel.expert (each expert rank holds as many experts)");
  }
  if (m.moe_experts > 0 && split.size() > 1 && !by.experts_why.empty()) {
    need(m.moe_experts, "model.moe_experts", p.expert * split.traits().expert_ways, by.experts_why);
    divide(tokens / by.batch.by, by.routed_tokens.empty() ? tokens_per_rank : by.routed_tokens, by.routed);
  }
  if (p.mgrit()) check_gpt_layer_steps(d, rule);
  if (p.last_stage_layers > 0 && p.pipeline > 1)
    rule(p.last_stage_layers <= m.n_layer - (p.pipeline - 1), "parallel.last_stage_layers",
         "(" + std::to_string(p.last_stage_layers) + ") must leave at least one layer to each other stage: at most " +
             "model.n_layer - (parallel.pipeline - 1) = " + std::to_string(m.n_layer - (p.pipeline - 1)));
  if (p.schedule == Schedule::Interleaved && p.pipeline > 1)
    rule(m.n_layer >= p.pipeline * p.virtual_stages, "model.n_layer",
         "(" + std::to_string(m.n_layer) + ") must be at least parallel.pipeline x parallel.virtual_stages (" +
             std::to_string(p.pipeline * p.virtual_stages) + "): every chunk holds at least one layer");
}

std::unique_ptr<StageModel<float>> make_gpt(const Deck& deck, const ModelPart& part) {
  const auto& par = deck.parallel;
  const auto& lp = deck.layerpar;
  const int layers = int(deck.model.n_layer), stages = int(par.pipeline);
  const auto placement =
      par.mgrit() ? StagePlacement::layer_steps(layers, int(lp.buffer_open), int(lp.buffer_close), stages, part.stage)
      : par.last_stage_layers > 0 && stages > 1
          ? StagePlacement::with_last(layers, stages, int(par.last_stage_layers), part.stage)
          : StagePlacement::interleaved(
                layers, stages, par.schedule == Schedule::Interleaved ? int(par.virtual_stages) : 1, part.stage);
  auto gpt = std::make_unique<GPT<float>>(deck.model, deck.run.seed, part.tp, placement, par.recompute, part.allocate,
                                          part.cp, part.ep);
  // ZeRO-2/3 over more than one replica, each backward whole (the zero-bubble schedules run its halves apart)
  const int replicas = int(par.data * par.context);
  gpt->use_fine_units(par.zero >= 2 && replicas > 1 && !(splits_backward(par.schedule) && par.pipeline > 1), replicas);
  attach_layer_steps(*gpt);
  return gpt;
}

RunDescription describe_gpt(const Deck& deck, StageModel<float>& model, const RunSetting& run) {
  auto& gpt = static_cast<GPT<float>&>(model);  // what make_gpt made
  const auto& m = deck.model;
  const int64_t gb = deck.data.batch_size;
  RunDescription d;
  d.samples_per_step = gb * m.seq_len;
  // the rate at the model's product shapes (model_gemm_rate, as strata calibrate and
  // bench/limit measure it), each shape 0.06 s or 10 products where those take less
  const double gemm = run.probe_gemm ? model_gemm_rate(deck, m.precision, 0.06, 10) / 1e9 : 0.0;
  std::function<ExpertLoad()> expert_load;  // the routing since the last progress line
  if (m.moe_experts > 0)
    expert_load = [&gpt] {
      const ExpertLoad load = gpt.mixture_load();
      gpt.reset_mixture_load();
      return load;
    };
  d.metrics = std::make_unique<LanguageModelMetrics>(d.samples_per_step, gpt.flops_per_token(), gemm, run.ranks,
                                                     std::move(expert_load));
  const bool bf16 = m.precision == Precision::BF16;
  d.lines.push_back(
      strfmt("strata: GPT %lld layers, C=%lld, %lld heads, vocab %lld%s, T=%lld: %.2fM parameters; %s data%s",
             (long long)m.n_layer, (long long)m.n_embd, (long long)m.n_head, (long long)m.vocab_size,
             m.vocab_rows() > m.vocab_size ? strfmt(" (padded to %lld)", (long long)m.vocab_rows()).c_str() : "",
             (long long)m.seq_len, double(gpt.params().table().global_numel()) / 1e6, to_string(deck.data.kind).c_str(),
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
               (long long)expert_ranks(deck.parallel)));
  }
  if (!run.data_line.empty()) d.lines.push_back("strata: data: " + run.data_line);
  if (const std::string note = blas_choice_note(); !note.empty()) d.lines.push_back("strata: OpenBLAS: " + note);
  const std::string blas = blas_core_name();
  d.lines.push_back(strfmt(
      "strata: %d ranks (%s; data-parallel %s collectives), global batch %lld x %lld tokens, %lld steps; gemm probe "
      "%.1f GFLOP/s per rank%s%s",
      run.ranks, run.layout.c_str(), to_string(deck.parallel.comm_backend).c_str(), (long long)gb, (long long)m.seq_len,
      (long long)deck.run.steps, gemm, bf16 ? " in bf16" : "",
      blas.empty() ? "" : (" (OpenBLAS " + blas + " kernels)").c_str()));
  return d;
}

std::vector<std::array<int64_t, 3>> gpt_product_shapes(const Deck& d) {
  const auto& m = d.model;
  const int64_t rows = std::min<int64_t>(d.data.batch_size / d.parallel.data * m.seq_len, 2048), c = m.n_embd;
  return {{rows, c, 3 * c}, {rows, c, c}, {rows, c, 4 * c}, {rows, 4 * c, c}, {rows, c, m.vocab_rows()}};
}

}  // namespace

ModelKind gpt_kind() {
  ModelKind k;
  k.name = "gpt";
  k.title = "the GPT";
  k.summary =
      "decoder-only transformer (GPT-2's blocks, tied embedding; mixtures of experts): n_layer, n_embd, "
      "n_head, vocab_size, seq_len, padded_vocab_size, moe_*";
  k.reads = {DataKind::Text, DataKind::Tokens, DataKind::Random};
  k.schedules = {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved,
                 Schedule::ZBH1,  Schedule::ZBH2,     Schedule::XPipe};
  k.pipeline = k.layer_parallel = k.tensor_split = k.context_split = k.selective_recompute = k.gathers_params = true;
  k.dry_models = true;
  k.layers = [](const ModelConfig& m) { return m.n_layer; };
  k.layers_key = "model.n_layer";
  k.check = check_gpt;
  k.make = make_gpt;
  k.describe = describe_gpt;
  k.product_shapes = gpt_product_shapes;
  k.keys = gpt_deck_keys();
  return k;
}

}  // namespace strata
