#include "report/run_metrics.hpp"

#include <algorithm>
#include <cmath>

#include "core/deck.hpp"
#include "core/log.hpp"
#include "core/memory.hpp"

namespace strata {

std::vector<std::string> LanguageModelMetrics::columns() const {
  std::vector<std::string> c = {"val_loss",    "val_bpb",      "lr",           "grad_norm",
                                "ms_per_step", "tokens_per_s", "gflops_per_s", "peak_rss_mib"};
  if (expert_load_) c.insert(c.end(), {"expert_load_min", "expert_load_max", "dropped"});
  return c;
}

std::string LanguageModelMetrics::progress(const ProgressFigures& w, std::vector<double>& row) const {
  const double dt = w.seconds / double(w.window_steps);
  const double tok_s = double(tokens_) / dt;
  const double gflops = flops_per_token_ * double(tokens_) / dt / 1e9;
  const double mem_mib = double(peak_rss_bytes()) / (1 << 20);
  std::string line;
  if (!std::isnan(w.val.loss)) line += strfmt(" | val %.4f", w.val.loss);
  if (!std::isnan(w.val.bits_per_byte)) line += strfmt(" (%.4f bits/byte)", w.val.bits_per_byte);
  line += strfmt(" | lr %.2e | norm %.3f | %.0f tok/s | %.1f ms/step | %.1f GFLOP/s", w.lr, w.grad_norm, tok_s,
                 dt * 1e3, gflops);
  if (gemm_gflops_ > 0) line += strfmt(" (%.0f%% of gemm)", 100.0 * gflops / (gemm_gflops_ * double(ranks_)));
  row.insert(row.end(), {w.val.loss, w.val.bits_per_byte, w.lr, w.grad_norm, dt * 1e3, tok_s, gflops, mem_mib});
  if (expert_load_) {  // the experts' shares of the assignments since the last line
    const ExpertLoad load = expert_load_();
    int64_t total = 0;
    for (auto a : load.assigned) total += a;
    double lo = 1, hi = 0;
    line += " | experts";
    for (size_t i = 0; i < load.assigned.size(); ++i) {
      const double share = total > 0 ? double(load.assigned[i]) / double(total) : 0.0;
      lo = std::min(lo, share), hi = std::max(hi, share);
      line += strfmt("%s%.0f", i ? "/" : " ", 100.0 * share);
    }
    const double dropped = total > 0 ? double(load.dropped) / double(total) : 0.0;
    line += strfmt("%% dropped %.1f%%", 100.0 * dropped);
    row.insert(row.end(), {lo, hi, dropped});
  }
  return line;
}

std::string LanguageModelMetrics::done_line(const RunTotals& r) const {
  return strfmt(", %.0f tokens/s, final loss %.4f", double(tokens_) * double(r.steps) / std::max(r.seconds, 1e-9),
                r.steps == 0 ? 0.0 : r.final_loss);
}

std::vector<std::string> ClassifierMetrics::columns() const {
  return {"train_acc", "val_loss", "val_acc", "lr", "grad_norm", "ms_per_step", "samples_per_s"};
}

std::string ClassifierMetrics::progress(const ProgressFigures& w, std::vector<double>& row) const {
  const double dt = w.seconds / double(w.window_steps);
  const double train_acc = double(w.correct) / double(w.window_steps * samples_);
  std::string line = strfmt(" | train acc %.3f", train_acc);
  if (!std::isnan(w.val.loss)) line += strfmt(" | test loss %.4f acc %.4f", w.val.loss, w.val.accuracy);
  line += strfmt(" | lr %.2e | norm %.3f | %.0f samples/s | %.1f ms/step", w.lr, w.grad_norm, double(samples_) / dt,
                 dt * 1e3);
  row.insert(row.end(), {train_acc, w.val.loss, w.val.accuracy, w.lr, w.grad_norm, dt * 1e3, double(samples_) / dt});
  return line;
}

std::string ClassifierMetrics::done_line(const RunTotals& r) const {
  return std::isnan(r.final_accuracy) ? "" : strfmt(", test accuracy %.4f", r.final_accuracy);
}

RunDescription describe_classifier(const Deck& deck, const RunSetting& run, const std::string& model_line) {
  const int64_t gb = deck.data.batch_size;
  RunDescription d;
  d.samples_per_step = gb;
  d.validates_at_end = true;
  d.metrics = std::make_unique<ClassifierMetrics>(gb);
  d.lines.push_back(model_line);
  d.lines.push_back(strfmt("strata: %d ranks (%s), global batch %lld, %lld steps", run.ranks, run.layout.c_str(),
                           (long long)gb, (long long)deck.run.steps));
  return d;
}

}  // namespace strata
