#pragma once
// Column sums of a row-major matrix (a bias gradient is the column sums of the output
// gradient), in a fixed order: the same result on every run.
#include <stdexcept>
#include <type_traits>

#include "core/tensor.hpp"
#include "kernels/bf16.hpp"
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

// The same, and m rounded to bf16 into `rounded` (dense, the products' rounding) in the
// same pass over m: for an output gradient that bf16 products read and whose column sums
// are a bias gradient (one read of m instead of two). The sums are add_column_sums' own,
// in its order: the same bits. Host float only.
template <class T>
void add_column_sums_rounding(V1<T> acc, V2<const T> m, bf16* rounded) {
  if constexpr (std::is_same_v<T, float> && Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    const int64_t rows = m.extent(0), cols = m.extent(1);
    if (int64_t(acc.extent(0)) != cols) throw std::logic_error("add_column_sums_rounding: acc is not one per column");
    const Tensor1<T> sums = reduce_rows<T>(
        "column_sums", rows, cols, KOKKOS_LAMBDA(const int64_t i, T* s) {
          const T* row = &m(i, 0);
#pragma GCC ivdep
          for (int64_t j = 0; j < cols; ++j) s[j] += row[j];
          round_rows_to_bf16(row, 0, rounded + i * cols, 0, 1, cols);
        });
    Kokkos::parallel_for(
        "column_sums_add", Range(0, cols), KOKKOS_LAMBDA(const int64_t j) { acc(j) += sums(j); });
  } else {
    (void)acc, (void)m, (void)rounded;
    throw std::logic_error("add_column_sums_rounding: host float only");
  }
}

}  // namespace strata::kernels
