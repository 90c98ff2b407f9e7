#pragma once
// Column sums of a row-major matrix (a bias gradient is the column sums of the output
// gradient), in a fixed order: the same result on every run.
#include "core/tensor.hpp"
#include "kernels/row_reduce.hpp"

namespace strata::kernels {

// acc (COLS) += the column sums of m (ROWS, COLS).
template <class T>
void add_column_sums(V1<T> acc, V2<const T> m) {
  const int64_t rows = m.extent(0), cols = m.extent(1);
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    // CPU: row by row into a vector of column sums (contiguous, vectorised)
    const Tensor1<T> sums = reduce_rows<T>(
        "column_sums", rows, cols, KOKKOS_LAMBDA(const int64_t i, T* s) {
          const T* row = &m(i, 0);
#pragma GCC ivdep
          for (int64_t j = 0; j < cols; ++j) s[j] += row[j];
        });
    Kokkos::parallel_for(
        "column_sums_add", Range(0, cols), KOKKOS_LAMBDA(const int64_t j) { acc(j) += sums(j); });
  } else {
    // GPU: one thread per column (adjacent threads read adjacent memory)
    Kokkos::parallel_for(
        "column_sums", Range(0, cols), KOKKOS_LAMBDA(const int64_t j) {
          T s = 0;
          for (int64_t i = 0; i < rows; ++i) s += m(i, j);
          acc(j) += s;
        });
  }
}

}  // namespace strata::kernels
