#include "core/rank_threads.hpp"

#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <vector>
#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif

namespace strata {
namespace {

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// "0-3,8,10-11"
std::string cpu_ranges(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

int rank_threads() { return Kokkos::DefaultHostExecutionSpace().concurrency(); }

int cores_given() {
  const int n = int(affinity_cpus().size());
  return n > 0 ? n : cores_online();
}

int cores_online() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

bool passive_wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy && strcasecmp(policy, "passive") == 0;
}

std::string thread_binding() {
  const char* bind = std::getenv("OMP_PROC_BIND");
  const char* places = std::getenv("OMP_PLACES");
  std::string omp;
  if (bind && std::string(bind) != "false") {
    omp = std::string("OMP_PROC_BIND=") + bind;
    if (places) omp += std::string(" OMP_PLACES=") + places;
  } else {
    omp = "threads not bound";
  }
  return "CPUs " + cpu_ranges(affinity_cpus()) + ", " + omp;
}

ProductThreads::ProductThreads(int n) {
#if defined(KOKKOS_ENABLE_OPENMP)
  before_ = omp_get_max_threads();
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

ProductThreads::~ProductThreads() {
#if defined(KOKKOS_ENABLE_OPENMP)
  omp_set_num_threads(before_);
#endif
}

}  // namespace strata
