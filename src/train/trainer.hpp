#pragma once
// The training loop: data -> engine (data parallel) -> clip -> AdamW -> metrics.
// Set-up errors (deck layout, data) are agreed on by all ranks before any training.
#include <mpi.h>

#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "core/timers.hpp"
#include "engine/pipeline/pipeline_engine.hpp"
#include "engine/train_engine.hpp"
#include "io/batch.hpp"
#include "io/token_source.hpp"
#include "model/gpt.hpp"
#include "train/model_checkpoint.hpp"

namespace strata {

struct TrainOptions {
  bool write_outputs = true;  // run directory, deck copy, metrics.csv, checkpoints
  std::string restart;        // "" (fresh), "latest" (newest in run_dir/checkpoints, if any), or a path
  bool print = true;          // progress lines and summary (rank 0)
  bool probe_gemm = true;     // measure the GEMM rate for the utilisation column
  std::string trace;          // write a Chrome/Perfetto timeline of every rank here ("" = none)
};

struct TrainResult {
  int64_t first_step = 0;                         // steps before this run (restart point)
  std::vector<double> losses;                     // global mean training loss per step run
  bool stopped_early = false;                     // a signal or run.max_walltime stopped it
  std::vector<std::pair<int64_t, double>> val;    // (step, validation loss)
  double seconds = 0;                             // training loop wall time
  double warm_seconds = 0;                        // of it, after the first round (allocation, first touch)
  int64_t warm_steps = 0;                         // steps in warm_seconds
  int64_t activation_bytes = 0;                   // this rank's activation caches and messages at the end
  double tokens_per_second = 0;
  std::vector<StalenessSummary> staleness;        // XPipe with parallel.measure_staleness: per stage
};

class Trainer {
 public:
  Trainer(const Deck& deck, MPI_Comm world, TrainOptions opts = {});
  ~Trainer();
  TrainResult run();
  GPT<float>& model() { return *model_; }
  // The communicators whose counters the summary reports, by the names it gives them.
  std::vector<std::pair<std::string, const Comm*>> comms() const;
  const Grid& grid() const { return *grid_; }

 private:
  double validate();
  void print_summary(const TrainResult& r);
  // Collective: writes and publishes the checkpoint of `state`; a NaN val_loss is computed first.
  void write_checkpoint(TrainingState state);
  // Loads `what` ("latest" or a path) into the model; sets start_.
  void restart_from(const std::string& what);
  std::string layout() const;
  // One synchronous step: forward/backward (data parallel, or a flushing pipeline), clip, AdamW.
  StreamStep train_step(int64_t step, AdamW<float>& optim, Batch& batch);
  // XPipe: steps first_step .. first_step + count - 1 in one stream (the engine updates).
  std::vector<StreamStep> train_stream(int64_t first_step, int64_t count, AdamW<float>& optim);
  // XPipe: how many steps from `step` on to stream before the trainer must look at the
  // run (log, validation, checkpoint, last step).
  int64_t stream_length(int64_t step) const;
  // XPipe with parallel.measure_staleness: every stage's summary (collective), printed by rank 0.
  std::vector<StalenessSummary> report_staleness();
  // Builds the tensor group's communicators and tp_ from the deck's [parallel] section.
  void setup_tensor_parallel();
  // Communication seconds and wire bytes of every communicator so far (this rank).
  std::pair<double, double> comm_totals() const;

  Deck deck_;
  TrainOptions opts_;
  std::unique_ptr<Grid> grid_;
  std::unique_ptr<Comm> world_comm_;  // run-wide agreement (stop requests, summary maxima)
  std::unique_ptr<Comm> data_comm_;
  std::unique_ptr<Comm> tensor_comm_, row_comm_, col_comm_;
  std::unique_ptr<Comm> model_comm_;  // one model replica: pipeline x tensor (gradient norm)
  TensorParallel tp_;
  Log log_;
  std::unique_ptr<TokenSource> data_;
  std::unique_ptr<GPT<float>> model_;
  std::unique_ptr<TrainEngine<float>> engine_;  // data parallel, or the pipeline
  PipelineEngine<float>* stream_ = nullptr;      // the engine, when it runs XPipe
  std::unique_ptr<StalenessMeter<float>> staleness_;
  std::vector<std::unique_ptr<Batch>> stream_batches_;
  Timers timers_;
  std::string run_dir_;  // out_dir/name on every rank when outputs are written, else ""
  double gemm_gflops_ = 0;
  TrainingState start_;  // where this run starts (a restart's checkpoint, or step 0)
  double last_checkpoint_seconds_ = 0;
};

}  // namespace strata
