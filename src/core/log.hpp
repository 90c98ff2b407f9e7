#pragma once
// Rank-0 logging: progress and summaries are printed once, by rank 0, to stdout;
// warnings and errors to stderr. The rank is given at construction (no global state).
#include <cstdio>
#include <string>

namespace strata {

class Log {
 public:
  explicit Log(int rank) : rank_(rank) {}
  void info(const std::string& line) const {
    if (rank_ == 0) {
      std::fprintf(stdout, "%s\n", line.c_str());
      std::fflush(stdout);
    }
  }
  void warn(const std::string& line) const {
    if (rank_ == 0) {
      std::fprintf(stderr, "strata: warning: %s\n", line.c_str());
      std::fflush(stderr);
    }
  }

 private:
  int rank_;
};

// printf into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace strata
