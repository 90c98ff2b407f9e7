#pragma once
// Residual connection: out = a + b. Its backward passes dout to both branches, which the
// model does by accumulating into the residual stream's gradient (residual_accumulate).
#include "core/tensor.hpp"

namespace strata::kernels {

template <class T>
void residual_forward(V1<T> out, V1<const T> a, V1<const T> b) {
  Kokkos::parallel_for(
      "residual_forward", Range(0, out.extent(0)), KOKKOS_LAMBDA(const int64_t i) { out(i) = a(i) + b(i); });
}

// dst += src: the backward of a residual add for the branch that shares dst.
template <class T>
void residual_accumulate(V1<T> dst, V1<const T> src) {
  Kokkos::parallel_for(
      "residual_accumulate", Range(0, dst.extent(0)), KOKKOS_LAMBDA(const int64_t i) { dst(i) += src(i); });
}

}  // namespace strata::kernels
