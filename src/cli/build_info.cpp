#include "cli/build_info.hpp"

#include <unistd.h>

#include <Kokkos_Core.hpp>

#include "comm/nccl_comm.hpp"
#include "core/blas_library.hpp"
#include "kernels/matmul_bf16.hpp"
#include "strata_version.hpp"

namespace strata {
namespace {

// Kokkos' execution spaces compiled into this build, the default first.
std::string kokkos_backends() {
  std::string all = Kokkos::DefaultExecutionSpace::name();
  const auto add = [&](const char* name) {
    if (all.find(name) == std::string::npos) all += std::string("+") + name;
  };
#ifdef KOKKOS_ENABLE_CUDA
  add("Cuda");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  add("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_THREADS
  add("Threads");
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  add("Serial");
#endif
  return all;
}

}  // namespace

std::string version_text() {
  const bool cuda = nccl_available();
  std::string build = std::string(cuda ? "CUDA build (cuBLAS, NCCL)" : "CPU build") + " " + STRATA_BUILD_TYPE +
                      ", Kokkos " + std::to_string(KOKKOS_VERSION / 10000) + "." +
                      std::to_string(KOKKOS_VERSION / 100 % 100) + "." + std::to_string(KOKKOS_VERSION % 100) + " " +
                      kokkos_backends();
  if (!cuda) {
    const std::string core = blas_core_name();
    const std::string threading = blas_threading();
    build += ", BLAS " + std::string(core.empty() ? "(not OpenBLAS)" : "OpenBLAS " + core + " kernels") +
             (threading.empty() ? "" : " (" + threading + ")");
  }
  build += ", bf16 products: " + kernels::bf16_products_library();
  return std::string("strata ") + STRATA_VERSION + " (git " + STRATA_GIT_COMMIT + "; " + build + ")";
}

std::string machines_dir() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string exe(self, size_t(n));
    const std::string installed = exe.substr(0, exe.rfind('/')) + "/../share/strata/machines";
    if (::access(installed.c_str(), R_OK) == 0) return installed;
  }
  return STRATA_MACHINES_DIR;
}

}  // namespace strata
