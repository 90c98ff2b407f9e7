#include "io/metrics_csv.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/error.hpp"

namespace strata {

MetricsCsv::MetricsCsv(const std::string& path, const std::vector<std::string>& columns, int64_t resume_after_step)
    : path_(path) {
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
  if (!f_) throw UserError("cannot write metrics file '" + path + "': " + std::strerror(errno));
  std::fprintf(f_, "%s\n", header.c_str());
  for (const auto& line : kept) std::fprintf(f_, "%s\n", line.c_str());
  if (std::fflush(f_) != 0) throw IoError("cannot write metrics file '" + path + "': " + std::strerror(errno));
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
  if (std::fflush(f_) != 0 || std::ferror(f_))
    throw IoError(path_ + ": a row could not be written: " + std::strerror(errno));
}

}  // namespace strata
