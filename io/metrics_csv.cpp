#include "io/metrics_csv.hpp"

#include <cmath>

#include "core/error.hpp"

namespace strata {

MetricsCsv::MetricsCsv(const std::string& path, const std::vector<std::string>& columns) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw UserError("cannot write metrics file '" + path + "'");
  for (size_t i = 0; i < columns.size(); ++i) std::fprintf(f_, "%s%s", i ? "," : "", columns[i].c_str());
  std::fprintf(f_, "\n");
  std::fflush(f_);
}

MetricsCsv::~MetricsCsv() {
  if (f_) std::fclose(f_);
}

void MetricsCsv::row(const std::vector<double>& values) {
  if (!f_) return;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) std::fputc(',', f_);
    if (!std::isnan(values[i])) std::fprintf(f_, "%.9g", values[i]);
  }
  std::fputc('\n', f_);
  std::fflush(f_);
}

}  // namespace strata
