#pragma once
// What a kind of model tells the run that trains it, beside its StageModel: its start-up
// lines, what one step counts (samples: tokens for a language model), whether it validates
// after the last step, and its RunMetrics (the metrics.csv columns, a progress line's
// fields, the end of the "done" line). make_model.hpp's describe_model gives it, from the
// same place that builds the model; the run loop formats nothing model-specific itself.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace strata {

// A validation's figures (NaN where the model or the data has none).
struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // classifiers only
  // language models whose tokens stand for known text: the loss in bits per byte of it
  double bits_per_byte = std::numeric_limits<double>::quiet_NaN();
};

// The steps since the last progress line, as the loop counted them.
struct ProgressFigures {
  int64_t window_steps = 0;      // steps in the window
  double seconds = 0;            // their time, validation and checkpoints excluded
  int64_t correct = 0;           // classifiers: training samples predicted right in the window
  double lr = 0, grad_norm = 0;  // the window's last step
  Evaluation val;                // at this step, if the loop evaluated (else NaN)
};

// The run as its "done" line reports it.
struct RunTotals {
  int64_t steps = 0;  // steps run
  double seconds = 0;
  double final_loss = std::numeric_limits<double>::quiet_NaN();
  double final_accuracy = std::numeric_limits<double>::quiet_NaN();  // the last validation's (classifiers)
};

// Stateless formatters of what the loop counted.
class RunMetrics {
 public:
  virtual ~RunMetrics() = default;
  // metrics.csv columns after step and loss
  virtual std::vector<std::string> columns() const = 0;
  // the progress line's fields after "loss X" (" | lr ... | ms/step ..."), and the row's
  // values for columns()
  virtual std::string progress(const ProgressFigures& w, std::vector<double>& row) const = 0;
  // the end of the "done: N steps in S s" line (", 28791 tokens/s, final loss 2.5998")
  virtual std::string done_line(const RunTotals& r) const = 0;
};

// What the run knows that the model does not: its ranks and layout, the data's line.
struct RunSetting {
  int ranks = 1;
  int data_ranks = 1;      // the data-parallel replicas the global batch is split over
  std::string layout;      // e.g. "data=2 pipeline=2:1f1b:4mb"
  std::string data_line;   // the batch source's line ("" none)
  bool probe_gemm = true;  // measure the GEMM rate for the utilisation column
};

struct RunDescription {
  std::vector<std::string> lines;  // start-up lines: the model, the data, the layout
  int64_t samples_per_step = 0;    // all ranks together (tokens for a language model)
  bool validates_at_end = false;   // validate after the last step even when run.val_every = 0
  std::unique_ptr<RunMetrics> metrics;
};

}  // namespace strata
