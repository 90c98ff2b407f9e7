#pragma once
// What a run reports beyond its loss, per kind of model: the metrics.csv columns, a
// progress line's fields and the end of the "done" line. Stateless: each call formats
// the figures it is given (the loop counts and records them).
#include <memory>
#include <string>
#include <vector>

#include "engine/layerpar/layer_parallel.hpp"
#include "model/gpt.hpp"
#include "train/run_result.hpp"

namespace strata {

class RunMetrics {
 public:
  virtual ~RunMetrics() = default;
  // metrics.csv columns after step and loss
  virtual std::vector<std::string> columns() const = 0;
  // the progress line's fields after "loss X" (" | lr ... | ms/step ..."), and the row's
  // values for columns()
  virtual std::string progress(const ProgressWindow& w, std::vector<double>& row) const = 0;
  // the end of the "done: N steps in S s" line (", 28791 tokens/s, final loss 2.5998")
  virtual std::string done_line(const TrainResult& r, double seconds) const = 0;
};

// A language model: validation bits per byte, tokens/s, model FLOP/s against the GEMM
// probe (gemm_gflops per rank; 0 = not measured). mixture: a GPT with mixture-of-experts
// layers, whose routing since the last progress line (its stage's layers, training and
// validation forwards) each line reports and then starts afresh: every expert's share of
// the assignments and the share dropped by the capacity; nullptr for a dense model.
class LanguageModelMetrics : public RunMetrics {
 public:
  LanguageModelMetrics(int64_t tokens_per_step, double flops_per_token, double gemm_gflops, int ranks,
                       GPT<float>* mixture = nullptr)
      : tokens_(tokens_per_step), flops_per_token_(flops_per_token), gemm_gflops_(gemm_gflops), ranks_(ranks),
        mixture_(mixture) {}
  std::vector<std::string> columns() const override;
  std::string progress(const ProgressWindow& w, std::vector<double>& row) const override;
  std::string done_line(const TrainResult& r, double seconds) const override;

 private:
  int64_t tokens_;
  double flops_per_token_, gemm_gflops_;
  int ranks_;
  GPT<float>* mixture_;
};

// A classifier: training and test accuracy, samples/s, and with MGRIT (mgrit != nullptr)
// the last step's forward residual and convergence factor.
class ClassifierMetrics : public RunMetrics {
 public:
  ClassifierMetrics(int64_t samples_per_step, const LayerParallel<float>* mgrit)
      : samples_(samples_per_step), mgrit_(mgrit) {}
  std::vector<std::string> columns() const override;
  std::string progress(const ProgressWindow& w, std::vector<double>& row) const override;
  std::string done_line(const TrainResult& r, double seconds) const override;

 private:
  int64_t samples_;
  const LayerParallel<float>* mgrit_;
};

}  // namespace strata
