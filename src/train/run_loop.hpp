#pragma once
// The run loop: the lifecycle of every training run, whatever the model and engine
// (train_job.hpp says what differs):
//  - set-up, agreed by all ranks before any training (comm/agree.hpp): the run directory
//    and its lock (io/run_lock.hpp), where to restart (restart_point.hpp), the checkpoint
//    read and checked against the deck (model section and seed must match; other
//    changes are logged), deck.toml and metrics.csv;
//  - the steps, in rounds (one step, or an XPipe stream up to the next step the loop must
//    look at), with their non-finite losses stopped (exit 5) or skipped
//    (run.on_nonfinite);
//  - validation, progress lines, metrics.csv rows;
//  - stop requests (a signal on any rank, run.max_walltime, an output that failed on any
//    rank), agreed after every round so every rank stops after the same step, with
//    StopWatchdog ending ranks that never get there;
//  - checkpoints, published all or nothing (checkpoint_publisher.hpp);
//  - the summary (timers, memory, communication per group and kind);
//  - with --trace, every rank's timeline.
// main builds the job, then RunLoop(deck, options, job, &watchdog).run(): the loop owns the
// job's run; constructing either writes nothing. The watchdog, made before the job is built,
// also ends a rank stuck in the building (without one the loop makes its own).
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_publisher.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "comm/mpi_handle.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "core/timers.hpp"
#include "io/metrics_csv.hpp"
#include "io/run_lock.hpp"
#include "train/fault_injection.hpp"
#include "train/run_result.hpp"
#include "train/stage_times.hpp"
#include "train/stop_watchdog.hpp"
#include "train/train_job.hpp"

namespace strata {

struct TrainOptions {
  JobOptions job;             // logging, the GEMM probe
  bool write_outputs = true;  // run directory, deck copy, metrics.csv, checkpoints
  std::string restart;        // "" (fresh), "latest" (newest in run_dir/checkpoints, if any), or a path
  bool fresh = false;         // start over a run directory that has checkpoints (they are moved aside)
  std::string trace;          // write a Chrome/Perfetto timeline of every rank here ("" = none)
  FaultInjection faults;      // --inject-fault (none by default)
};

class RunLoop {
 public:
  RunLoop(const Deck& deck, const TrainOptions& opts, TrainSteps& job, StopWatchdog* watchdog = nullptr);
  ~RunLoop();
  // Collective: the set-up (every failure agreed: the same error on every rank, before
  // any training; the restart checkpoint is read into job.params()), then the steps from
  // the restart point to run.steps, or until a stop request.
  TrainResult run();

 private:
  void set_up();
  TrainResult train();
  // This rank's communication so far over the grid's reported groups: (seconds, wire bytes).
  std::pair<double, double> comm_totals() const;
  // The last step of the round that starts at `step`: the step itself, or for a job that
  // streams, the first step from there on after which the loop must look (log,
  // validation, checkpoint, the last step), within the job's max_round_steps().
  int64_t round_end(int64_t step) const;
  TrainState checkpoint_state(int64_t steps_done, int64_t optim_steps, double val) const;
  void print_summary(const TrainResult& r);

  // The parts of run(), on its state.
  struct Window;  // the steps since the last progress line, and what the loop carries along
  // The round's outcomes into result; a step not applied stops the run (exit 5) or is
  // skipped (run.on_nonfinite).
  void account(const std::vector<StepOutcome>& done, int64_t first, TrainResult& result, Window& w);
  // The validation the deck asks for after (0-based) step, if any.
  Evaluation validate_if_due(int64_t step, TrainResult& result, Window& w);
  // The progress line and metrics row the deck asks for after step, if any.
  void log_if_due(int64_t step, const StepOutcome& last, double lr, const Evaluation& val, const TrainResult& result,
                  Window& w);
  // The stop decision of all ranks after step: 0 go on, 1 stop (signal, wall time), 2 an
  // output failed.
  int agree_on_stop(int64_t step, const Window& w, bool& out_of_time);
  void checkpoint(int64_t step, int64_t optim_steps, Evaluation& val, bool pause, Window& w);

  const Deck& deck_;
  TrainOptions opts_;
  TrainSteps& job_;
  StopWatchdog* watchdog_;  // the caller's, or null
  Log log_;
  int rank_ = 0;
  std::string run_dir_;
  std::unique_ptr<RunLock> lock_;        // rank 0, while the run lives
  std::unique_ptr<MetricsCsv> metrics_;  // rank 0
  std::unique_ptr<StageTimes> stage_times_;  // pipeline runs
  std::unique_ptr<CheckpointPublisher> publisher_;
  TrainState start_;
  Timers timers_;
  double last_checkpoint_seconds_ = 0;
};

}  // namespace strata
