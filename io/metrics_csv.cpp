#include "io/metrics_csv.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.hpp"

namespace strata {

MetricsCsv::MetricsCsv(const std::string& path, const std::vector<std::string>& columns, int64_t resume_after_step) {
  std::string header;
  for (size_t i = 0; i < columns.size(); ++i) header += (i ? "," : "") + columns[i];
  std::vector<std::string> kept;
  if (resume_after_step >= 0) {
    std::ifstream in(path);
    std::string line;
    if (std::getline(in, line) && line == header)
      while (std::getline(in, line))
        if (!line.empty() && std::atoll(line.c_str()) <= resume_after_step) kept.push_back(line);
  }
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw UserError("cannot write metrics file '" + path + "'");
  std::fprintf(f_, "%s\n", header.c_str());
  for (const auto& line : kept) std::fprintf(f_, "%s\n", line.c_str());
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
