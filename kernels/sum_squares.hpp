#pragma once
// Sum of squares of a vector (for gradient norms), accumulated in double, in an order
// fixed by the vector's length (the same bits on any number of threads).
#include "core/tensor.hpp"
#include "kernels/lanes.hpp"
#include "kernels/row_reduce.hpp"

namespace strata::kernels {

template <class T>
double sum_of_squares(V1<const T> x) {
  const int64_t n = x.extent(0);
  // chunks of 4096 summed in vector lanes (kernels/lanes.hpp; a one-term-at-a-time double
  // reduction stays scalar), the chunks added in order (kernels/row_reduce.hpp)
  return ordered_sum(
      "sum_of_squares", n, 4096, KOKKOS_LAMBDA(const int64_t begin, const int64_t end) {
        const T* p = x.data() + begin;
        return lane_sum<double>(end - begin, [&](int64_t j) { return double(p[j]) * double(p[j]); });
      });
}

}  // namespace strata::kernels
