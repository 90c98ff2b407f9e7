#pragma once
// The RunMetrics of the kinds of model (run_description.hpp): a language model's and a
// classifier's. Stateless: each call formats the figures it is given.
#include <memory>
#include <string>
#include <vector>

#include "model/gpt.hpp"
#include "model/run_description.hpp"

namespace strata {

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
  std::string progress(const ProgressFigures& w, std::vector<double>& row) const override;
  std::string done_line(const RunTotals& r) const override;

 private:
  int64_t tokens_;
  double flops_per_token_, gemm_gflops_;
  int ranks_;
  GPT<float>* mixture_;
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
