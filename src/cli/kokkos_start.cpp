#include "cli/kokkos_start.hpp"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "cli/thread_choice.hpp"
#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"

namespace strata {
namespace {

void bind_device_by_local_rank() {
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::getenv("KOKKOS_DEVICE_ID") || std::getenv("KOKKOS_NUM_DEVICES")) return;
  const int local = node_share(MPI_COMM_WORLD).local_rank;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return;  // Kokkos reports it
  setenv("KOKKOS_DEVICE_ID", std::to_string(local % devices).c_str(), 1);
#endif
}

bool is_help(const char* arg) { return std::string(arg) == "--help" || std::string(arg) == "-h"; }

}  // namespace

KokkosStart::KokkosStart(int argc, char** argv, int rank) {
  bind_device_by_local_rank();
  std::vector<char*> line(argv, argv + argc);
  ThreadChoice threads;
  try {
    threads = choose_threads(line, node_share(MPI_COMM_WORLD).local_size);  // takes --threads out of the line
  } catch (const UserError& e) {
    error_ = e.what();
    return;
  }
  apply_threads(threads);
  // Kokkos prints its own options for --help and -h: it gets the command line without
  // them, and the rank's thread count; strata says itself where threads run
  // (core/rank_threads), so Kokkos' advice on binding and oversubscription is left out
  std::vector<char*> kokkos_argv;
  for (char* a : line) {
    if (!is_help(a)) kokkos_argv.push_back(a);
    help_ = help_ || std::string(a) == "--kokkos-help";
  }
  std::string threads_arg = "--kokkos-threads=" + std::to_string(threads.count), quiet = "--kokkos-disable-warnings";
  kokkos_argv.push_back(threads_arg.data());
  kokkos_argv.push_back(quiet.data());
  kokkos_argv.push_back(nullptr);
  int kokkos_argc = int(kokkos_argv.size()) - 1;
  try {
    guard_.emplace(kokkos_argc, kokkos_argv.data());
  } catch (const std::exception& e) {
    const std::string why = e.what();
    std::fprintf(stderr, "strata: error: rank %d cannot initialise Kokkos (%s): %s\n", rank,
                 Kokkos::DefaultExecutionSpace::name(), why.substr(0, why.find('\n')).c_str());
    abort_job(MPI_COMM_WORLD, kExitUserError);
  }
  // what Kokkos left (its --kokkos-* options removed), help included, in order
  const std::set<char*> left(kokkos_argv.begin(), kokkos_argv.begin() + kokkos_argc);
  for (char* a : line)
    if (left.count(a) || is_help(a)) args_.push_back(a);
}

KokkosStart::~KokkosStart() = default;

}  // namespace strata
