#pragma once
// What a training run records: the run's result (what tests and callers read back).
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/pipeline/staleness_meter.hpp"
#include "optim/optimizer_step.hpp"
#include "report/run_description.hpp"

namespace strata {

struct TrainResult {
  int64_t first_step = 0;                            // steps before this run (restart point)
  std::vector<double> losses;                        // global mean training loss per step run
  int64_t skipped_steps = 0;                         // steps not applied (run.on_nonfinite = "skip")
  bool stopped_early = false;                        // a signal or run.max_walltime stopped it
  std::vector<std::pair<int64_t, double>> val;       // (step, validation loss)
  std::vector<std::pair<int64_t, double>> accuracy;  // classifiers: (step, validation accuracy)
  double seconds = 0;                                // training loop wall time
  double warm_seconds = 0;                           // of it, after the first round (allocation, first touch)
  int64_t warm_steps = 0;                            // steps in warm_seconds
  int64_t activation_bytes = 0;                      // this rank's activation caches and messages at the end
  int64_t state_bytes = 0;       // its parameters, gradients, moments (and XPipe's weight copy, the bf16 copy)
  double tokens_per_second = 0;  // samples per second (tokens for a language model)
  std::vector<StalenessSummary> staleness;  // XPipe with parallel.measure_staleness: per stage
  int64_t reordered_passes = 0;  // parallel.dispatch = "ready": this rank's passes run before the schedule's next
};

}  // namespace strata
