#pragma once
// A training job: the model, its engine and its data on a rank grid, built from a deck,
// for every kind of model (make_model, make_engine, make_batch_source choose the parts).
// The run loop (run_loop.hpp) drives it through TrainSteps, all it needs of a job, and
// owns the lifecycle (run directory, restart, stop requests, checkpoints, reporting).
// Building a job allocates and communicates but writes no file and takes no lock.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/grid.hpp"
#include "comm/mpi_handle.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "core/timers.hpp"
#include "data/batch_source.hpp"
#include "engine/train_engine.hpp"
#include "optim/optimizer_groups.hpp"
#include "optim/optimizer_step.hpp"
#include "report/run_description.hpp"
#include "state/param_store.hpp"
#include "train/run_result.hpp"

namespace strata {

// What a job is, fixed when it is built.
struct JobFacts {
  std::vector<std::string> description;  // start-up lines: the model, the data, the layout
  std::string layout;                    // e.g. "data=2 pipeline=2:1f1b:4mb" (progress, checkpoints)
  int64_t samples_per_step = 0;          // all ranks together (tokens for a language model)
  int64_t max_round_steps = 1;           // steps a round may take at once (XPipe's stream: more)
  bool validates_at_end = false;         // validate after the last step even when run.val_every = 0
  std::string tokenizer_model;           // the data's SentencePiece model, which checkpoints carry ("" none)
};

// What the run loop needs of a job. Collective calls are marked.
class TrainSteps {
 public:
  virtual ~TrainSteps() = default;
  virtual const Grid& grid() const = 0;
  virtual ParamStore<float>& params() = 0;
  virtual const JobFacts& facts() const = 0;
  virtual const RunMetrics& metrics() const = 0;
  // The ranks the update talks to (OptimizerStep).
  virtual const OptimizerGroups& optimizer_groups() const = 0;
  // Steps first_step .. first_step + count - 1 (0-based): forward, backward and the
  // update (never applied when the loss or gradient norm is not finite). A job that
  // streams may end the round early, after fewer steps, when stop_requested() is true on
  // any rank (it asks at each update). Collective.
  virtual std::vector<StepOutcome> train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update,
                                               Timers& timers, const std::function<bool()>& stop_requested) = 0;
  // The validation figures over run.val_batches batches. Collective.
  virtual Evaluation evaluate() = 0;
  // This rank's memory beside the parameter store: (activation caches, messages and the
  // model's workspace,
  // weights it keeps a copy of: XPipe's true weights under a prediction, the parameters
  // rounded to bf16).
  virtual std::pair<int64_t, int64_t> memory() const = 0;
  // After the last step: what the job measured on the way (XPipe's staleness) into the
  // result, with its lines. Collective.
  virtual void report_end(const Log& log, TrainResult& result) {
    (void)log;
    (void)result;
  }
  // What the engine decided that a restart continues with (TrainEngine::checkpoint_state),
  // and its restore from a checkpoint.
  virtual std::string engine_state() const { return ""; }
  virtual void restore_engine_state(const std::string& state) { (void)state; }
};

struct JobOptions {
  bool print = true;           // rank 0 logs
  bool probe_gemm = true;      // measure the GEMM rate for the utilisation column
  std::string threads_origin;  // where the rank's thread count came from (cli/thread_choice)
};

class TrainJob : public TrainSteps {
 public:
  // Set-up in phases (the grid, the data, the model, the engine), each agreed by every
  // rank before the next one's collectives, so a failure on some ranks only (a file
  // missing on one node) ends every rank alike.
  TrainJob(const Deck& deck, MPI_Comm world, const JobOptions& options = {});
  ~TrainJob() override;
  StageModel<float>& model() { return *model_; }
  TrainEngine<float>& engine() { return *engine_; }
  std::string engine_state() const override { return engine_->checkpoint_state(); }
  void restore_engine_state(const std::string& state) override { engine_->restore_state(state); }

  const Grid& grid() const override { return *grid_; }
  ParamStore<float>& params() override { return model_->params(); }
  const JobFacts& facts() const override { return facts_; }
  const RunMetrics& metrics() const override { return *metrics_; }
  const OptimizerGroups& optimizer_groups() const override { return groups_; }
  std::vector<StepOutcome> train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update, Timers& timers,
                                       const std::function<bool()>& stop_requested) override;
  Evaluation evaluate() override;
  std::pair<int64_t, int64_t> memory() const override {
    return {engine_->activation_bytes() + model_->workspace_bytes(),
            engine_->weight_copy_bytes() + model_->params().rounded_copy_bytes()};
  }
  void report_end(const Log& log, TrainResult& result) override;

 private:
  void describe(const JobOptions& options);
  std::string threads_line(const std::string& origin) const;
  std::string nodes_line() const;

  Deck deck_;
  std::unique_ptr<Grid> grid_;
  std::unique_ptr<BatchSource> data_;
  std::unique_ptr<StageModel<float>> model_;
  std::unique_ptr<StalenessMeter<float>> staleness_;  // XPipe with parallel.measure_staleness
  std::unique_ptr<TrainEngine<float>> engine_;
  std::unique_ptr<RunMetrics> metrics_;  // the model's, with the engine's figures after them
  OptimizerGroups groups_;
  JobFacts facts_;
  double val_text_bytes_ = 0;  // bytes of text the validation targets stand for (0: not counted yet; NaN: unknown)
};

}  // namespace strata
