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

// A branch scaled by a step size (layer-parallel coarse steps, model/gpt_layer_steps.hpp):
// branch := x + scale branch, the residual add of the step x + scale f(x), in place on
// the branch's output ...
template <class T>
void residual_accumulate_scaled(V1<T> branch, V1<const T> x, T scale) {
  Kokkos::parallel_for(
      "residual_accumulate_scaled", Range(0, branch.extent(0)),
      KOKKOS_LAMBDA(const int64_t i) { branch(i) = x(i) + scale * branch(i); });
}

// ... and its backward's branch gradient: dst = scale dout.
template <class T>
void scaled_copy(V1<T> dst, V1<const T> src, T scale) {
  Kokkos::parallel_for(
      "scaled_copy", Range(0, dst.extent(0)), KOKKOS_LAMBDA(const int64_t i) { dst(i) = scale * src(i); });
}

}  // namespace strata::kernels
