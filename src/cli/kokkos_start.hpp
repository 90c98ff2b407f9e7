#pragma once
// Kokkos for a strata process, started before the command line is parsed: in CUDA builds
// one GPU per rank, chosen by the rank's index on its node unless the user chose
// (KOKKOS_DEVICE_ID / KOKKOS_NUM_DEVICES); Kokkos reads its --kokkos-* options, never
// --help or -h (strata's own; --kokkos-help lists Kokkos'), and the rest is strata's.
// The rank's thread count is chosen first (cli/thread_choice) and Kokkos started with it.
#include <Kokkos_Core.hpp>
#include <optional>
#include <string>
#include <vector>

namespace strata {

class KokkosStart {
 public:
  // A Kokkos that cannot start (a GPU build on a node without a usable GPU or driver) is
  // one line on stderr and the job aborted with exit code 2.
  KokkosStart(int argc, char** argv, int rank);
  ~KokkosStart();
  // --kokkos-help: Kokkos printed its options and there is nothing else to do.
  bool printed_help() const { return help_; }
  // A command line whose thread options are wrong (cli/thread_choice): why; Kokkos was not
  // started and there is nothing else to do. "" otherwise.
  const std::string& error() const { return error_; }
  // The command line Kokkos left, --help and -h included, in order (argv[0] first).
  std::vector<char*>& args() { return args_; }

 private:
  std::optional<Kokkos::ScopeGuard> guard_;
  std::vector<char*> args_;
  bool help_ = false;
  std::string error_;
};

}  // namespace strata
