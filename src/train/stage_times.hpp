#pragma once
// Which pipeline stage is slow, and what it cost: every progress line, each rank's
// seconds per step since the last one, split into compute (its passes, injected
// slowdowns included), wait (for another stage's message: the bubble as this rank sees
// it) and communication (the data group's sums, the dispatch agreement), its forward and
// backward passes apart (injected slowdowns not included: what `strata plan --schedule
// --stage-costs` simulates from) and the step's wall time, gathered to rank 0 and written
// to the run directory's stages.csv (one row per rank); at the end a line
// naming the rank and stage that computed longest against the median rank, and the share
// of the step the stages waited. Pipeline runs only (parallel.pipeline > 1).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/grid.hpp"
#include "comm/mpi_handle.hpp"
#include "core/timers.hpp"
#include "io/metrics_csv.hpp"

namespace strata {

class StageTimes {
 public:
  // world: every rank; stage: this rank's pipeline stage; csv_path: rank 0's stages.csv
  // ("" elsewhere, or for no file), resumed after resume_after_step on a restart (-1: fresh).
  // micro_batches: the step's, written on every row (what a pass's seconds are a share of).
  StageTimes(MPI_Comm world, int stage, const std::string& csv_path, int64_t resume_after_step, int64_t micro_batches);
  // A pipeline run's (null for others): run_dir/stages.csv on rank 0 (none without a run
  // directory), resumed after `start_step` steps.
  static std::unique_ptr<StageTimes> for_run(const Grid& grid, const std::string& run_dir, int64_t start_step,
                                             int64_t micro_batches);
  // Collective, at every progress line: the window of `steps` steps ending after `step`.
  void window_done(int64_t step, int64_t steps, double window_seconds, const Timers& timers);
  // Rank 0: "stage 2 on rank 5 computed 1.38x the median rank's time per step; the stages
  // waited 21% of the step" over the run so far ("" before any window, and elsewhere).
  std::string summary() const;

 private:
  struct Totals {
    double compute = 0, wait = 0, comm = 0, forward = 0, backward = 0;
  };
  static Totals read(const Timers& timers);
  MPI_Comm world_;
  int rank_ = 0, size_ = 1, stage_ = 0;
  int64_t micro_batches_ = 1;
  std::unique_ptr<MetricsCsv> csv_;
  Totals before_;                      // this rank's at the window's start
  std::vector<double> run_;            // rank 0: per rank (stage, compute, wait, comm) seconds over the run
  double run_seconds_ = 0;             // the windows' wall time
};

}  // namespace strata
