#include "core/blas_library.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

namespace strata {
namespace {

// The widest vector units a kernel family of OpenBLAS uses: 3 AVX-512, 2 AVX2, 1 AVX, 0
// SSE (families not listed: as good as any, never replaced).
int family_level(const std::string& core) {
  static const std::map<std::string, int> levels = {
      {"Prescott", 0},    {"Core2", 0},      {"Penryn", 0},     {"Dunnington", 0},    {"Nehalem", 0},   {"Atom", 0},
      {"Katmai", 0},      {"Coppermine", 0}, {"Northwood", 0},  {"Banias", 0},        {"Barcelona", 0}, {"Opteron", 0},
      {"Sandybridge", 1}, {"Bulldozer", 1},  {"Piledriver", 1}, {"Steamroller", 1},   {"Excavator", 1}, {"Haswell", 2},
      {"Zen", 2},         {"SkylakeX", 3},   {"Cooperlake", 3}, {"SapphireRapids", 3}};
  const auto it = levels.find(core);
  return it == levels.end() ? 3 : it->second;
}

int cpu_level() {
#if !defined(__x86_64__)
  return 0;  // (the families above are x86's)
#else
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
  return __builtin_cpu_supports("avx") ? 1 : 0;
#endif
}

}  // namespace

std::string better_blas_core() {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("STRATA_BLAS_CHOSEN")) return "";
  const std::string core = blas_core_name();
  if (core.empty()) return "";
  const int cpu = cpu_level();
  if (cpu <= family_level(core)) return "";
  static const char* kFamily[] = {"", "Sandybridge", "Haswell", "SkylakeX"};
  return kFamily[cpu];
}

void restart_with_blas_core(const std::string& core, char** argv) {
  ::setenv("STRATA_BLAS_CHOSEN", blas_core_name().c_str(), 1);
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OPENBLAS_CORETYPE");  // (execv failed: run on with OpenBLAS's own choice)
}

std::string blas_choice_note() {
  const char* replaced = std::getenv("STRATA_BLAS_CHOSEN");
  if (!replaced || !std::getenv("OPENBLAS_CORETYPE") || blas_core_name() == replaced) return "";  // (not taken)
  return blas_core_name() + " kernels chosen by strata (OpenBLAS picked " + replaced +
         " on this CPU; OPENBLAS_CORETYPE overrides)";
}

std::string blas_core_name() {
  // looked up, not linked: the BLAS may be another implementation
  using CoreName = char* (*)();
  const auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? std::string(name) : std::string();
}

std::string blas_threading() {
  using Parallel = int (*)();
  const auto fn = reinterpret_cast<Parallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (!fn) return "";
  switch (fn()) {
    case 0:
      return "sequential";
    case 1:
      return "pthreads";
    case 2:
      return "OpenMP";
    default:
      return "";
  }
}

}  // namespace strata
