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
//
// On x86-64 CPU builds (GCC) whose target has AVX2 and FMA (the release preset's
// x86-64-v3), the host loops are compiled twice, for x86-64-v4 (AVX-512: GELU's forward and
// backward ran in 2.9 instead of 4.7 ms over 2048 x 1536 values on one core) and for the
// build's target, and the CPU picks one when the program starts (target_clones: an
// ifunc), with f inlined into each (flatten: a large f, called from two clones, was left
// a call, and its loops, reading f's captures through a pointer, went scalar). Both fuse
// the same multiplies and adds (both have FMA) and sum in the same order
// (kernels/lanes.hpp), so both compute the same bits; a build for a target without FMA
// keeps its one loop, since an AVX-512 clone would fuse where it does not.
#include "core/tensor.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(KOKKOS_ENABLE_CUDA) && \
    defined(__AVX2__) && defined(__FMA__)
#define STRATA_HOST_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "default"), flatten))
#else
#define STRATA_HOST_ISA_CLONES
#endif

namespace strata::kernels {

namespace detail {
template <class F>
STRATA_HOST_ISA_CLONES void each_element_of_chunk(const F& f, int64_t begin, int64_t end) {
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) f(i);
}
template <class F>
STRATA_HOST_ISA_CLONES void one_row(const F& f, int64_t i) {
  const F row = f;
  row(i);
}
}  // namespace detail

template <class F>
void for_each_element(const char* label, int64_t n, const F& f) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    constexpr int64_t chunk = 1024;
    const int64_t chunks = (n + chunk - 1) / chunk;
    Kokkos::parallel_for(
        label, Range(0, chunks), KOKKOS_LAMBDA(const int64_t c) {
          detail::each_element_of_chunk(f, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
        });
  } else {
    Kokkos::parallel_for(label, Range(0, n), f);
  }
}

template <class F>
void for_each_row(const char* label, int64_t n, const F& f) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    Kokkos::parallel_for(
        label, Range(0, n), KOKKOS_LAMBDA(const int64_t i) { detail::one_row(f, i); });
  } else {
    Kokkos::parallel_for(label, Range(0, n), f);
  }
}

}  // namespace strata::kernels
