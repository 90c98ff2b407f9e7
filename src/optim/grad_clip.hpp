#pragma once
// Gradient clipping by global norm. The norm is over the full (reduced) gradient, which
// every data-parallel rank holds identically after the all-reduce.
#include "core/tensor.hpp"

namespace strata {

// Returns the global L2 norm of grads; scales them by max_norm/norm when it exceeds
// max_norm (> 0).
template <class T>
double clip_grad_norm(V1<T> grads, double max_norm) {
  double sumsq = 0;
  Kokkos::parallel_reduce(
      "grad_norm", Range(0, grads.extent(0)),
      KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(grads(i)) * double(grads(i)); }, sumsq);
  const double norm = std::sqrt(sumsq);
  if (max_norm > 0 && norm > max_norm) {
    const T scale = T(max_norm / (norm + 1e-6));
    Kokkos::parallel_for(
        "grad_clip", Range(0, grads.extent(0)), KOKKOS_LAMBDA(const int64_t i) { grads(i) *= scale; });
  }
  return norm;
}

}  // namespace strata
