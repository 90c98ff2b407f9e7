#pragma once
// The deck: a run's typed configuration, read from TOML and validated before any work.
// Every key has a type and a default (or is required); an unknown section or key, a wrong
// type, or an out-of-range value is a UserError naming the key and the file.
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct RunConfig {
  std::string name = "run";
  std::string out_dir = "runs";  // the run directory is out_dir/name
  int64_t steps = 100;
  int64_t log_every = 10;
  int64_t val_every = 0;    // 0: no periodic validation
  int64_t val_batches = 4;  // validation batches (of data.batch_size) per evaluation
  uint64_t seed = 1337;
  int64_t checkpoint_every = 0;  // steps between checkpoints (and one at the end); 0: none
  int64_t keep_checkpoints = 3;  // complete checkpoints kept in run_dir/checkpoints
  double max_walltime = 0;       // seconds; checkpoint and stop before this much has passed (0: no limit)
  std::string on_nonfinite = "stop";  // a step with a non-finite loss or gradient norm: "stop" (exit 5) or "skip" it
  int64_t max_skipped_steps = 10;     // "skip": stop (exit 5) after this many skipped steps in a row
  double stop_timeout = 60;           // seconds a rank may take to reach a step boundary after a stop signal
                                      // before it exits without a checkpoint (0: wait for ever)
};

struct ModelConfig {
  std::string kind = "gpt";  // "gpt", or "resnet" (residual network for images: n_layer steps of width n_embd)
  int64_t n_layer = 4;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t vocab_size = 256;  // 256 for byte-level text
  int64_t seq_len = 128;     // context length T (also the position table size)
  double init_std = 0.02;
  double t_final = 1.0;         // resnet: T = n_layer h
  double step_init_std = 0.01;  // resnet: std of the residual steps' weights
  int64_t channels = 0;         // resnet: > 0 makes it convolutional (3x3, this many channels); 0: dense of n_embd
};

struct DataConfig {
  std::string kind = "text";       // "text" (bytes of files), "random" (uniform tokens) or "images" (IDX, MNIST layout)
  std::string dir = "/usr/share/datasets/fashion-mnist";  // for kind = "images"
  std::vector<std::string> files;  // paths or globs, for kind = "text"
  double val_fraction = 0.05;      // share of text held out for validation
  int64_t batch_size = 8;          // global sequences per step, split over data-parallel ranks
};

struct ParallelConfig {
  // The run's 4D rank grid: data x pipeline x tensor_rows x tensor_cols = rank count.
  int64_t data = 1;                  // data-parallel replicas
  int64_t pipeline = 1;              // pipeline stages
  int64_t tensor_rows = 1;           // tensor-parallel grid rows (1 for the 1D split)
  int64_t tensor_cols = 1;           // tensor-parallel grid columns (t of the 1D split)
  std::string tensor_mode = "1d";    // "1d" (Megatron, tensor_rows = 1) or "2d" (Optimus, square)
  int64_t ranks() const { return data * pipeline * tensor_rows * tensor_cols; }
  std::string comm_backend = "mpi";  // collectives on device buffers: "mpi" or "nccl" (CUDA builds)
  double grad_bucket_mb = 4.0;       // gradient all-reduce bucket (MB), started during the backward;
                                     // 0: one all-reduce after the backward
  int64_t micro_batches = 1;         // pipeline: micro-batches per step (per data replica)
  std::string schedule = "1f1b";     // pipeline schedule: "gpipe", "1f1b" or "xpipe"
  bool weight_prediction = true;     // xpipe: run each pass on weights predicted to its target
  bool measure_staleness = false;    // xpipe: report how far each pass's weights are from its target's
};

struct OptimConfig {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  double weight_decay = 0.1;  // applied to 2D weights only, not to biases and norms
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // max global gradient norm; 0 disables clipping
};

// Layer-parallel training of a residual network by MGRIT (model.kind = "resnet"): the
// steps are spread over parallel.pipeline ranks and solved like time steps.
struct LayerParConfig {
  int64_t levels = 1;               // 1: sequential propagation (the serial network, split in blocks)
  int64_t cfactor = 4;              // coarsening factor
  int64_t fwd_iterations = 2;       // MGRIT V-cycles of the forward solve
  int64_t bwd_iterations = 1;       // of the adjoint solve
  double tolerance = 0.0;           // stop earlier when the residual norm falls below (0: never)
  std::string relaxation = "F";     // finest level: "F" or "FCF" (coarser levels use FCF)
  bool warm_start = true;           // start each solve from the previous batch's solution
};

struct Deck {
  std::string path;  // the file it came from ("" when built in code)
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  ParallelConfig parallel;
  OptimConfig optim;
  LayerParConfig layerpar;
  std::string resolved_toml;  // the deck after overrides and defaults, as TOML
};

// Reads and validates a deck. overrides are "section.key=value" strings applied on top of
// the file (the value is parsed as TOML, or taken as a string when it does not parse).
Deck load_deck(const std::string& path, const std::vector<std::string>& overrides = {});

// The same from TOML text already in memory (tests, tools). origin names it in errors.
Deck parse_deck(const std::string& toml_text, const std::string& origin,
                const std::vector<std::string>& overrides = {});

// Throws a UserError when the deck's parallel layout does not fit its model and batch:
// sizes the tensor split must divide (Megatron 1D over t ranks; Optimus 2D over q x q),
// micro-batches, layers per pipeline stage. load_deck calls it; so does the planner for
// every layout it considers.
void check_model_fits_grid(const Deck& d, const std::string& origin);

}  // namespace strata
