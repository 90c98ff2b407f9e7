#pragma once
// Errors strata reports to the user, each with its exit code (the README's table):
//   UserError      2  bad input: deck, data, layout, command line, checkpoint, run directory
//   IoError        4  a write, flush, fsync or rename of the run's outputs failed (disk full,
//                     quota, I/O error): nothing was published, the last good checkpoint stands
//   DivergedError  5  the loss or gradient norm is not finite (run.on_nonfinite = "stop", or
//                     too many skipped steps in a row): the last good checkpoint stands
//   out of memory  6  an allocation failed (std::bad_alloc, or Kokkos' allocation error):
//                     out_of_memory_text names what and how much
//   noisy          7  `strata calibrate` measured a busy node (other processes, or rates that
//                     moved between repeats): no machine file written
// Anything else that escapes is an internal error, exit code 1. An error that every rank
// agreed on (comm/agree.hpp) is printed once by rank 0 and ends every rank normally; an
// error one rank sees alone after set-up is printed by that rank and aborts the job.
#include <cctype>
#include <new>
#include <regex>
#include <stdexcept>
#include <string>

namespace strata {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitUserError = 2;
constexpr int kExitChecksum = 3;  // `strata inspect` found a tensor failing its checksum
constexpr int kExitIoError = 4;
constexpr int kExitDiverged = 5;
constexpr int kExitOutOfMemory = 6;
constexpr int kExitNoisyMeasurement = 7;

// A failure with its exit code. `agreed`: every rank of the job holds the same error
// (thrown by agree_on_error), so nobody waits in a collective and no abort is needed.
class StrataError : public std::runtime_error {
 public:
  StrataError(const std::string& what, int exit_code, bool agreed = false)
      : std::runtime_error(what), exit_code_(exit_code), agreed_(agreed) {}
  int exit_code() const { return exit_code_; }
  bool agreed() const { return agreed_; }

 private:
  int exit_code_;
  bool agreed_;
};

class UserError : public StrataError {
 public:
  explicit UserError(const std::string& what, bool agreed = false) : StrataError(what, kExitUserError, agreed) {}
};

class IoError : public StrataError {
 public:
  explicit IoError(const std::string& what, bool agreed = false) : StrataError(what, kExitIoError, agreed) {}
};

class DivergedError : public StrataError {
 public:
  explicit DivergedError(const std::string& what, bool agreed = false) : StrataError(what, kExitDiverged, agreed) {}
};

// An allocation failure as one line, or "" when e is another error: std::bad_alloc, or
// Kokkos' text for a failed allocation (several sentences, with the view's label and size).
inline std::string out_of_memory_text(const std::exception& e) {
  const std::string what = e.what();
  const std::string advice =
      " (this rank's memory, or its limit, is used up; parallel.zero, recomputation, accumulation or more ranks "
      "need less per rank: strata plan)";
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "out of memory: an allocation failed" + advice;
  if (what.find("failed to allocate memory") == std::string::npos) return "";
  std::smatch label, size;
  std::regex_search(what, label, std::regex("label \"([^\"]*)\""));
  std::regex_search(what, size, std::regex("Allocation of size ([0-9.]+ ?[KMGT]?)"));
  const std::string bytes = size.empty() ? "" : size[1].str();  // Kokkos' K, M, G are powers of 1024
  return "out of memory: " +
         (bytes.empty() ? std::string("a buffer") : bytes + (std::isalpha(bytes.back()) ? "iB" : " bytes")) +
         (label.empty() ? std::string() : " for \"" + label[1].str() + "\"") + " could not be allocated" + advice;
}

// Throws the error class of exit_code (UserError for 2, IoError for 4, ...; StrataError
// with the code otherwise) carrying `what`.
[[noreturn]] inline void throw_error(int exit_code, const std::string& what, bool agreed) {
  switch (exit_code) {
    case kExitUserError:
      throw UserError(what, agreed);
    case kExitIoError:
      throw IoError(what, agreed);
    case kExitDiverged:
      throw DivergedError(what, agreed);
    default:
      throw StrataError(what, exit_code, agreed);
  }
}

}  // namespace strata
