#pragma once
// Row-wise work that also sums a vector over rows (e.g. a layernorm backward's weight
// gradients), deterministic and device-correct: a Kokkos array reduction, so no atomics
// and the same sum order on every run.
#include "core/tensor.hpp"

namespace strata::kernels {

// Functor body: for row i, add into sums[0 .. width) (the caller's layout).
// RowFn is called as fn(i, T* sums).
template <class T, class RowFn>
struct RowArrayReduce {
  using value_type = T[];
  using size_type = int64_t;
  size_type value_count;
  RowFn fn;
  RowArrayReduce(int64_t width, RowFn f) : value_count(width), fn(f) {}
  KOKKOS_INLINE_FUNCTION void operator()(const int64_t i, value_type sums) const { fn(i, sums); }
  KOKKOS_INLINE_FUNCTION void init(value_type sums) const {
    for (size_type j = 0; j < value_count; ++j) sums[j] = T(0);
  }
  KOKKOS_INLINE_FUNCTION void join(value_type dst, const value_type src) const {
    for (size_type j = 0; j < value_count; ++j) dst[j] += src[j];
  }
  KOKKOS_INLINE_FUNCTION void join(volatile value_type dst, const volatile value_type src) const {
    for (size_type j = 0; j < value_count; ++j) dst[j] += src[j];
  }
};

// Runs fn over rows [0, rows) and returns the per-column sums (width values) in a view.
template <class T, class RowFn>
Tensor1<T> reduce_rows(const char* label, int64_t rows, int64_t width, RowFn fn) {
  Tensor1<T> sums(std::string(label), width);
  Kokkos::parallel_reduce(label, Range(0, rows), RowArrayReduce<T, RowFn>(width, fn), sums);
  return sums;
}

}  // namespace strata::kernels
