#pragma once
// What a training run records: a validation's figures, a window of steps for a progress
// line, and the run's result (what tests and callers read back).
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/pipeline/staleness_meter.hpp"
#include "optim/optimizer_step.hpp"

namespace strata {

struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // classifiers only
  // language models whose tokens stand for known text: the loss in bits per byte of it
  double bits_per_byte = std::numeric_limits<double>::quiet_NaN();
};

// The steps since the last progress line.
struct ProgressWindow {
  int64_t step = 0, steps = 0;  // the step just done (1-based) and the run's total
  int64_t window_steps = 0;     // steps in the window
  double seconds = 0;           // their time, validation and checkpoints excluded
  int64_t correct = 0;          // classifiers: training samples predicted right in the window
  double comm_seconds = 0, comm_bytes = 0;  // this rank's communication in the window
  StepOutcome last;             // the window's last step
  double lr = 0;
  Evaluation val;               // at this step, if the loop evaluated (else NaN)
};

struct TrainResult {
  int64_t first_step = 0;                         // steps before this run (restart point)
  std::vector<double> losses;                     // global mean training loss per step run
  int64_t skipped_steps = 0;                      // steps not applied (run.on_nonfinite = "skip")
  bool stopped_early = false;                     // a signal or run.max_walltime stopped it
  std::vector<std::pair<int64_t, double>> val;    // (step, validation loss)
  std::vector<std::pair<int64_t, double>> accuracy;  // classifiers: (step, validation accuracy)
  double seconds = 0;                             // training loop wall time
  double warm_seconds = 0;                        // of it, after the first round (allocation, first touch)
  int64_t warm_steps = 0;                         // steps in warm_seconds
  int64_t activation_bytes = 0;                   // this rank's activation caches and messages at the end
  int64_t state_bytes = 0;                        // its parameters, gradients, moments (and XPipe's weight copy, the bf16 copy)
  double tokens_per_second = 0;                   // samples per second (tokens for a language model)
  std::vector<StalenessSummary> staleness;        // XPipe with parallel.measure_staleness: per stage
};

}  // namespace strata
