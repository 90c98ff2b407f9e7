#pragma once
// for_each_element(label, n, f): calls f(i) for i in [0, n) as one Kokkos kernel. On host
// backends the range is cut into chunks whose inner loop carries `GCC ivdep`, so the
// compiler vectorises it (Kokkos' own Serial loop stays scalar when f reads and writes
// different views it cannot prove distinct); on GPUs it is one thread per element.
#include "core/tensor.hpp"

namespace strata::kernels {

template <class F>
void for_each_element(const char* label, int64_t n, const F& f) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    constexpr int64_t chunk = 1024;
    const int64_t chunks = (n + chunk - 1) / chunk;
    Kokkos::parallel_for(
        label, Range(0, chunks), KOKKOS_LAMBDA(const int64_t c) {
          const int64_t end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
#pragma GCC ivdep
          for (int64_t i = c * chunk; i < end; ++i) f(i);
        });
  } else {
    Kokkos::parallel_for(label, Range(0, n), f);
  }
}

}  // namespace strata::kernels
