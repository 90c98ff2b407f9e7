#pragma once
// metrics.csv in the run directory: one row per logged step, written by rank 0 and
// flushed each row so a killed run keeps what it measured; a row that cannot be written
// is an IoError (the run loop stops the run with a checkpoint).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace strata {

class MetricsCsv {
 public:
  MetricsCsv() = default;
  // Starts path afresh; or, when resume_after_step >= 0 (a restart), keeps the rows of an
  // existing file up to that step and appends after them.
  MetricsCsv(const std::string& path, const std::vector<std::string>& columns, int64_t resume_after_step = -1);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;
  // NaN is written as an empty cell. Throws IoError when the row does not reach the file.
  void row(const std::vector<double>& values);

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace strata
