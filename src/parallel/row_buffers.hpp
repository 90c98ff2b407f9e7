#pragma once
// Buffers of rows kept between calls and grown as needed (the counts of routed rows change
// at every step), and views of their leading rows.
#include <algorithm>
#include <string>

#include "core/tensor.hpp"

namespace strata {

// v holds at least `rows` rows of `cols` (reallocated, uninitialised, only to grow)
template <class V, class... N>
void ensure_row_capacity(V& v, const char* label, int64_t rows, N... cols) {
  if (int64_t(v.extent(0)) < rows || v.data() == nullptr)
    v = V(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), size_t(std::max<int64_t>(rows, 1)),
          size_t(cols)...);
}
template <class T>
V2<T> leading_rows(const Tensor2<T>& t, int64_t rows) {
  return as_matrix(t.data(), rows, int64_t(t.extent(1)));
}
template <class T>
V1<T> values_of(V2<T> t) {
  return V1<T>(t.data(), t.extent(0) * t.extent(1));
}

}  // namespace strata
