#pragma once
// The deck: a run's typed configuration, read from TOML and validated before any work.
// Every key has a type and a default, declared once in deck_keys.cpp (the defaults are
// the initial values below); an unknown section or key, a wrong type, or an out-of-range
// value is a UserError naming the key and the file.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/deck_choices.hpp"
#include "core/layout.hpp"

namespace strata {

// Each key's meaning, allowed values and default are in the table of deck_keys.cpp (and
// docs/deck.md, generated from it).
struct RunConfig {
  std::string name = "run";
  std::string out_dir = "runs";
  int64_t steps = 100;
  int64_t log_every = 10;
  int64_t val_every = 0;
  int64_t val_batches = 4;
  uint64_t seed = 1337;
  int64_t checkpoint_every = 0;
  int64_t keep_checkpoints = 3;
  double max_walltime = 0;
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  int64_t max_skipped_steps = 10;
  double stop_timeout = 60;
};

struct ModelConfig {
  // the model's kind: a name src/model defines (model/model_kind.hpp), which declares the
  // keys of the fields below that are its own (the core reads them only as keys)
  std::string kind = "gpt";
  // the GPT's
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t vocab_size = 256;
  int64_t seq_len = 128;
  int64_t padded_vocab_size = 0;  // the embedding's rows, when more than vocab_size (llm.c's padding)
  // the residual network's
  int64_t steps = 4;
  int64_t width = 256;
  int64_t channels = 0;
  double t_final = 1.0;
  double step_init_std = 0.01;
  // both
  double init_std = 0.02;
  std::string init_from;  // a fresh run's starting weights (checkpoint/initial_weights.hpp)
  Precision precision = Precision::FP32;
  bool bf16_round_once = true;  // bf16: operands many products read rounded once, not in every product
  // the GPT's mixture of experts (model/moe_layer.hpp): E experts (0: every MLP dense), each
  // token to top_k of them, in every moe_every-th block; capacity_factor 0 = dropless
  int64_t moe_experts = 0;
  int64_t moe_top_k = 2;
  int64_t moe_every = 2;
  double moe_capacity_factor = 0.0;
  int64_t moe_ffn_hidden = 0;  // an expert's hidden width (0: 4C, the dense MLP's)
  double moe_aux_loss = 0.01;  // optim.moe_aux_loss: the load-balancing loss's coefficient
  double moe_z_loss = 0.0;     // optim.moe_z_loss: the router z-loss's coefficient
  // whether block l (0-based) has a mixture of experts for its MLP: the moe_every-th, 2 moe_every-th, ...
  bool moe_block(int64_t l) const { return moe_experts > 0 && (l + 1) % moe_every == 0; }
  int64_t expert_hidden() const { return moe_ffn_hidden > 0 ? moe_ffn_hidden : 4 * n_embd; }
  // the token embedding's rows: vocab_size, or padded_vocab_size when that is larger
  int64_t vocab_rows() const { return padded_vocab_size > vocab_size ? padded_vocab_size : vocab_size; }
};

struct DataConfig {
  DataKind kind = DataKind::Text;
  std::string dir = "/usr/share/datasets/fashion-mnist";
  std::vector<std::string> files;
  std::string token_dir;
  std::vector<std::string> shards, val_shards;
  std::string tokenizer;
  TokenizerType tokenizer_type = TokenizerType::BPE;
  double shard_mb = 64.0;
  double val_fraction = 0.05;
  int64_t batch_size = 8;
};

struct OptimConfig {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;
};

// Layer-parallel training by MGRIT (parallel.schedule = "mgrit"): a model's ODE steps are
// spread over parallel.pipeline ranks and solved like time steps.
struct LayerParConfig {  // (its levels are the layout's: Layout::mgrit_levels)
  int64_t cfactor = 4;
  int64_t fwd_iterations = 2;
  int64_t bwd_iterations = 1;
  double tolerance = 0.0;
  Relaxation relaxation = Relaxation::F;
  bool warm_start = true;
  int64_t buffer_open = 0;   // gpt: serial blocks before the MGRIT steps ...
  int64_t buffer_close = 0;  // ... and after them
  // the inexact gradients' control: every check_every steps the step's gradient is
  // compared with the exact one (a one-level solve of the same batch); past
  // max_gradient_error (relative) the control switches to exact solves or adds an
  // iteration to each solve
  GradientControl control = GradientControl::None;
  int64_t check_every = 0;
  double max_gradient_error = 0.3;
};

// Injected variability (a what-if tool, and the benchmarks' and tests' slow stages): each
// pass (forward, backward or one of its halves) on the chosen pipeline stages is followed
// by an idle wait of a drawn share of its own time, drawn from the seed, the step, the
// stage, the micro-batch and the pass, so every dispatch mode meets the same delays.
struct VariabilityConfig {
  int64_t stage = -1;  // the pipeline stage slowed (-1: every stage, each drawn independently)
  SlowdownDraw draw = SlowdownDraw::Uniform;
  double slowdown_min = 0;  // the wait, as a share of the pass's time (uniform: [min, max])
  double slowdown_max = 0;  // 0: no injected variability
  double spike_chance = 0.1;  // spikes: the chance of a pass being slowed by slowdown_max
  uint64_t seed = 1;
  bool active() const { return slowdown_max > 0; }
};

struct Deck {
  std::string path;  // the file it came from ("" when built in code)
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  Layout parallel;  // the [parallel] keys and layerpar.levels (core/layout.hpp)
  OptimConfig optim;
  LayerParConfig layerpar;
  VariabilityConfig variability;
  std::string resolved_toml;  // the deck after overrides and defaults, as TOML
};

}  // namespace strata
