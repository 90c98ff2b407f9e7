#pragma once
// metrics.csv in the run directory: one row per logged step, written by rank 0 and
// flushed each row so a killed run keeps what it measured.
#include <cstdio>
#include <string>
#include <vector>

namespace strata {

class MetricsCsv {
 public:
  MetricsCsv() = default;
  MetricsCsv(const std::string& path, const std::vector<std::string>& columns);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;
  void row(const std::vector<double>& values);  // NaN is written as an empty cell

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace strata
