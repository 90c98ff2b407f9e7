#pragma once
// Sum of squares of a vector (for gradient norms).
#include "core/tensor.hpp"

#if !defined(KOKKOS_ENABLE_CUDA)
#include <KokkosBlas1_dot.hpp>
#endif

namespace strata::kernels {

template <class T>
double sum_of_squares(V1<const T> x) {
#if defined(KOKKOS_ENABLE_CUDA)
  double s = 0;
  Kokkos::parallel_reduce(
      "sum_of_squares", Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(x(i)) * double(x(i)); }, s);
  return s;
#else
  // 1D layouts are the same memory; KokkosBlas hands LayoutLeft vectors to BLAS ?dot,
  // which is vectorised (a plain double-accumulating reduction is not).
  Kokkos::View<const T*, Kokkos::LayoutLeft, MemSpace, Unmanaged> v(x.data(), x.extent(0));
  return double(KokkosBlas::dot(v, v));
#endif
}

}  // namespace strata::kernels
