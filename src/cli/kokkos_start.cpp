#include "cli/kokkos_start.hpp"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

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
  // Kokkos prints its own options for --help and -h: it gets the command line without them
  std::vector<char*> kokkos_argv;
  for (int i = 0; i < argc; ++i) {
    if (!is_help(argv[i])) kokkos_argv.push_back(argv[i]);
    help_ = help_ || std::string(argv[i]) == "--kokkos-help";
  }
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
  for (int i = 0; i < argc; ++i)
    if (left.count(argv[i]) || is_help(argv[i])) args_.push_back(argv[i]);
}

KokkosStart::~KokkosStart() = default;

}  // namespace strata
