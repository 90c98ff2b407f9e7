#pragma once
// Gradient clipping by global norm. The norm is over the full (reduced) gradient, which
// every data-parallel rank holds identically after the all-reduce.
#include <cmath>

#include "kernels/sum_squares.hpp"

namespace strata {

// Returns the global L2 norm of grads; scales them by max_norm/norm when it exceeds
// max_norm (> 0).
template <class T>
double clip_grad_norm(V1<T> grads, double max_norm) {
  const double norm = std::sqrt(kernels::sum_of_squares<T>(grads));
  if (max_norm > 0 && norm > max_norm) {
    const T scale = T(max_norm / (norm + 1e-6));
    Kokkos::parallel_for(
        "grad_clip", Range(0, grads.extent(0)), KOKKOS_LAMBDA(const int64_t i) { grads(i) *= scale; });
  }
  return norm;
}

}  // namespace strata
