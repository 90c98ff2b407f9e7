#pragma once
// for_each_element(label, n, f): calls f(i) for i in [0, n) as one Kokkos kernel. On host
// backends the range is cut into chunks whose inner loop carries `GCC ivdep`, so the
// compiler vectorises it (Kokkos' own Serial loop stays scalar when f reads and writes
// different views it cannot prove distinct); on GPUs it is one thread per element.
//
// for_each_row(label, n, f): the same for f(i) that loops over row i itself. On host
// backends each call runs on the calling thread's own copy of f. Kokkos' OpenMP backend
// gives its threads f by reference, in memory the compiler must assume a store through
// a float pointer may change (a captured float, say), so it re-reads f's captures inside
// the row's loops instead of vectorising them: the fused attention's softmax steps ran at
// 0.73x their Serial-backend speed on one thread so. A copy on the thread's own stack is
// known to be untouched.
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

template <class F>
void for_each_row(const char* label, int64_t n, const F& f) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    Kokkos::parallel_for(
        label, Range(0, n), KOKKOS_LAMBDA(const int64_t i) {
          const F row = f;
          row(i);
        });
  } else {
    Kokkos::parallel_for(label, Range(0, n), f);
  }
}

}  // namespace strata::kernels
