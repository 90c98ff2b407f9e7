#include "core/blas_library.hpp"

#include <dlfcn.h>

namespace strata {

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
