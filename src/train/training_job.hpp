#pragma once
// What the run loop (run_loop.hpp) needs of a model and its engine: the GPT (Trainer)
// and the residual network (ClassifierTrainer) implement it. The loop owns the
// lifecycle (run directory, restart, stop requests, non-finite steps, checkpoints,
// progress, summary); a job owns its model, engine, data and how it reports them.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/parallel_modes.hpp"
#include "core/timers.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/param_store.hpp"
#include "optim/optimizer_step.hpp"

namespace strata {

// This rank's place in comm (a job's log prints on rank 0 of the world).
inline int rank_in(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

// model.precision = "bf16" where this build and machine cannot multiply in bf16: one line.
inline void require_precision_runs(Precision precision) {
  if (precision == Precision::BF16)
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty())
      throw UserError("model.precision = \"bf16\" cannot run here: " + why + " (use \"fp32\")");
}

// parallel.zero = 1 with more than one data replica: this rank keeps the AdamW moments of
// its data rank's block only (optim/zero_sharding.hpp). Before the engine's first step and
// before a checkpoint is read.
inline void shard_optimizer_state(ParamStore<float>& store, const Grid& grid, int64_t zero) {
  if (zero > 0 && grid.data_size() > 1) store.shard_moments(grid.data_size(), grid.coords().data);
}

struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // classifiers only
  // language models whose tokens stand for known text: the loss in bits per byte of it
  double bits_per_byte = std::numeric_limits<double>::quiet_NaN();
};

// The steps since the last progress line, for the job to format.
struct ProgressWindow {
  int64_t step = 0, steps = 0;  // the step just done (1-based) and the run's total
  int64_t window_steps = 0;     // steps in the window
  double seconds = 0;           // their time, validation and checkpoints excluded
  double comm_seconds = 0, comm_bytes = 0;  // this rank's communication in the window (comm_totals)
  StepOutcome last;             // the window's last step
  double lr = 0;
  Evaluation val;               // at this step, if the loop evaluated (else NaN)
};

class TrainingJob {
 public:
  virtual ~TrainingJob() = default;
  virtual ParamStore<float>& params() = 0;
  // What this rank holds beside the parameter store: its engine's activation caches and
  // messages, and weights it keeps a copy of (XPipe's true weights under a prediction).
  virtual int64_t activation_bytes() const = 0;
  virtual int64_t weight_copy_bytes() const = 0;
  virtual const Grid& grid() const = 0;
  virtual MPI_Comm world() const { return grid().world(); }
  // e.g. "data=2 pipeline=2:1f1b:4mb" (progress line, checkpoint attribute)
  virtual std::string layout() const = 0;
  // Start-up lines: the model, data and layout.
  virtual void describe(const Log& log) = 0;
  // Samples (tokens for a language model) per optimizer step, all ranks together.
  virtual int64_t samples_per_step() const = 0;
  // Steps train_round may take at once: 1, or more for a job that streams them without a
  // flush (XPipe).
  virtual int64_t max_round_steps() const = 0;
  // Steps first_step .. first_step + count - 1 (0-based): forward, backward and the
  // update (OptimizerStep: never applied when the loss or gradient norm is not finite). A
  // job that streams may end the round early, after fewer steps, when stop_requested() is
  // true on any rank (it asks at each update). Collective.
  virtual std::vector<StepOutcome> train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update,
                                               Timers& timers, const std::function<bool()>& stop_requested) = 0;
  // The validation loss (and accuracy) over run.val_batches batches. Collective.
  virtual Evaluation evaluate() = 0;
  // true: validate after the last step even when run.val_every = 0.
  virtual bool validates_at_end() const { return false; }
  // The tokenizer the data was written with (a SentencePiece model's bytes; "" none):
  // every checkpoint carries it, so that it decodes the model's tokens wherever it goes.
  virtual std::string tokenizer_model() const { return {}; }
  // After every step (steps_done = the 1-based step just finished), after its checkpoint.
  virtual void after_step(int64_t /*steps_done*/) {}
  // Progress: metrics.csv columns after step and loss, and for a window the line's fields
  // after "loss X" (" | lr ... | ms/step ...") with the row's values for those columns.
  virtual std::vector<std::string> metric_columns() const = 0;
  virtual std::string progress(const ProgressWindow& w, std::vector<double>& row) = 0;
  // This rank's communication so far: (seconds, wire bytes).
  virtual std::pair<double, double> comm_totals() const { return {0.0, 0.0}; }
  // The end of the "done: N steps in S s" line (", 28791 tokens/s, final loss 2.5998").
  virtual std::string done_line(int64_t steps_run, double seconds, double last_loss) const = 0;
  // Lines after the timer table (memory, communication). Collective.
  virtual void print_summary(const Log& /*log*/, double /*loop_seconds*/, int64_t /*steps_run*/) {}
};

}  // namespace strata
