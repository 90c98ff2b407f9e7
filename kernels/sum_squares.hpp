#pragma once
// Sum of squares of a vector (for gradient norms) through BLAS dot.
#include <KokkosBlas1_dot.hpp>

#include "core/tensor.hpp"

namespace strata::kernels {

template <class T>
double sum_of_squares(V1<const T> x) {
  // 1D layouts are the same memory; KokkosBlas hands LayoutLeft vectors to BLAS ?dot,
  // which is vectorised (a plain double-accumulating reduction is not).
  Kokkos::View<const T*, Kokkos::LayoutLeft, MemSpace, Unmanaged> v(x.data(), x.extent(0));
  return double(KokkosBlas::dot(v, v));
}

}  // namespace strata::kernels
