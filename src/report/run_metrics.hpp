#pragma once
// The RunMetrics of the kinds of model (run_description.hpp): a language model's and a
// classifier's. Stateless: each call formats the figures it is given.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "report/expert_load.hpp"
#include "report/run_description.hpp"

namespace strata {

// A language model: validation bits per byte, tokens/s, model FLOP/s against the GEMM
// probe (gemm_gflops per rank; 0 = not measured). expert_load: a model with
// mixture-of-experts layers, whose routing since the last call (its stage's layers,
// training and validation forwards) each progress line reports: every expert's share of
// the assignments and the share dropped by the capacity; empty for a dense model.
class LanguageModelMetrics : public RunMetrics {
 public:
  LanguageModelMetrics(int64_t tokens_per_step, double flops_per_token, double gemm_gflops, int ranks,
                       std::function<ExpertLoad()> expert_load = {})
      : tokens_(tokens_per_step), flops_per_token_(flops_per_token), gemm_gflops_(gemm_gflops), ranks_(ranks),
        expert_load_(std::move(expert_load)) {}
  std::vector<std::string> columns() const override;
  std::string progress(const ProgressFigures& w, std::vector<double>& row) const override;
  std::string done_line(const RunTotals& r) const override;

 private:
  int64_t tokens_;
  double flops_per_token_, gemm_gflops_;
  int ranks_;
  std::function<ExpertLoad()> expert_load_;
};

// A classifier: training and test accuracy, samples/s.
class ClassifierMetrics : public RunMetrics {
 public:
  explicit ClassifierMetrics(int64_t samples_per_step) : samples_(samples_per_step) {}
  std::vector<std::string> columns() const override;
  std::string progress(const ProgressFigures& w, std::vector<double>& row) const override;
  std::string done_line(const RunTotals& r) const override;

 private:
  int64_t samples_;
};

// An image classifier's description (run_description.hpp): its model line, then the
// ranks' line; samples per step are images, validated at the end.
struct Deck;
RunDescription describe_classifier(const Deck& deck, const RunSetting& run, const std::string& model_line);

}  // namespace strata
