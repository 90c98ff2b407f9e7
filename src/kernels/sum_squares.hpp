#pragma once
// Sum of squares of a vector (for gradient norms), accumulated in double.
#include "core/tensor.hpp"
#include "kernels/lanes.hpp"

namespace strata::kernels {

template <class T>
double sum_of_squares(V1<const T> x) {
  const int64_t n = x.extent(0);
  double s = 0;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    // chunks summed in vector lanes (kernels/lanes.hpp); a one-term-at-a-time double
    // reduction stays scalar
    constexpr int64_t chunk = 4096;
    Kokkos::parallel_reduce(
        "sum_of_squares", Range(0, (n + chunk - 1) / chunk),
        KOKKOS_LAMBDA(const int64_t c, double& acc) {
          const T* p = x.data() + c * chunk;
          const int64_t len = n - c * chunk < chunk ? n - c * chunk : chunk;
          acc += lane_sum<double>(len, [&](int64_t j) { return double(p[j]) * double(p[j]); });
        },
        s);
  } else {
    Kokkos::parallel_reduce(
        "sum_of_squares", Range(0, n),
        KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(x(i)) * double(x(i)); }, s);
  }
  return s;
}

}  // namespace strata::kernels
