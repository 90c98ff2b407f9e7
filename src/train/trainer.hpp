#pragma once
// The GPT's training job (training_job.hpp): data (text or random tokens) -> engine (data
// parallel, a flushing pipeline, or XPipe's stream) -> clipping -> AdamW, with tensor
// parallelism inside. The run loop (run_loop.hpp) owns the lifecycle. Set-up errors
// (deck layout, data, checkpoint, run directory) are agreed on by all ranks before any
// training.
#include <mpi.h>

#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "engine/pipeline/pipeline_engine.hpp"
#include "engine/train_engine.hpp"
#include "io/batch.hpp"
#include "io/token_source.hpp"
#include "model/gpt.hpp"
#include "train/run_loop.hpp"
#include "train/training_job.hpp"

namespace strata {

struct GptTrainResult : TrainResult {
  std::vector<StalenessSummary> staleness;  // XPipe with parallel.measure_staleness: per stage
};

class Trainer : public TrainingJob {
 public:
  Trainer(const Deck& deck, MPI_Comm world, TrainOptions opts = {});
  ~Trainer() override;
  GptTrainResult run();
  GPT<float>& model() { return *model_; }
  const Grid& grid() const override { return *grid_; }

  // TrainingJob
  ParamStore<float>& params() override { return model_->params(); }
  std::string layout() const override;
  void describe(const Log& log) override;
  int64_t samples_per_step() const override { return deck_.data.batch_size * deck_.model.seq_len; }
  int64_t max_round_steps() const override { return engine_->max_steps_per_call(); }
  std::vector<StepOutcome> train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update, Timers& timers,
                                       const std::function<bool()>& stop_requested) override;
  Evaluation evaluate() override;
  std::vector<std::string> metric_columns() const override;
  std::string progress(const ProgressWindow& w, std::vector<double>& row) override;
  std::pair<double, double> comm_totals() const override;
  std::string done_line(int64_t steps_run, double seconds, double last_loss) const override;
  void print_summary(const Log& log, double loop_seconds, int64_t steps_run) override;
  std::string tokenizer_model() const override { return tokenizer_model_; }
  int64_t activation_bytes() const override { return engine_->activation_bytes(); }
  int64_t weight_copy_bytes() const override { return engine_->weight_copy_bytes(); }

 private:
  // XPipe with parallel.measure_staleness: every stage's summary (collective), printed by rank 0.
  std::vector<StalenessSummary> report_staleness();

  Deck deck_;
  TrainOptions opts_;
  std::unique_ptr<Grid> grid_;
  TensorParallel tp_;
  Log log_;
  std::unique_ptr<TokenSource> data_;
  std::string tokenizer_model_;  // token shards' SentencePiece model ("" none)
  double val_text_bytes_ = 0;    // bytes of text the validation targets stand for (NaN: unknown)
  std::unique_ptr<GPT<float>> model_;
  std::unique_ptr<TrainEngine<float>> engine_;  // data parallel, or the pipeline
  std::unique_ptr<StalenessMeter<float>> staleness_;
  std::vector<std::unique_ptr<Batch>> batches_;  // one per step of a round (the first also for validation)
  double gemm_gflops_ = 0;
  std::unique_ptr<RunLoop> loop_;
};

}  // namespace strata
