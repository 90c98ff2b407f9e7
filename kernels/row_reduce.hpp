#pragma once
// Reductions whose result does not depend on the number of threads: the terms are split
// into chunks fixed by their count alone, each chunk summed in order by one thread, and
// the chunks' partial sums added in chunk order. A rank with 1, 2 or 64 threads gets the
// same bits (on a GPU, Kokkos' reductions are deterministic for a fixed launch).
#include <vector>

#include "core/tensor.hpp"
#include "kernels/elementwise.hpp"

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

// The chunks rows are split into for a row reduction on a CPU: at least 16 rows each, at
// most 64 chunks (enough for 64 threads), fixed by the row count alone.
inline int64_t row_chunks(int64_t rows) {
  const int64_t c = rows / 16;
  return c < 1 ? 1 : (c > 64 ? 64 : c);
}

// Runs fn over rows [0, rows) and returns the per-column sums (width values) in a view.
template <class T, class RowFn>
Tensor1<T> reduce_rows(const char* label, int64_t rows, int64_t width, RowFn fn) {
  Tensor1<T> sums(std::string(label), width);
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    // chunk c's rows summed in order into partial row c; the partials added in chunk order
    const int64_t chunks = row_chunks(rows), per = (rows + chunks - 1) / chunks;
    Tensor2<T> partial(std::string(label) + ".partial", chunks, width);
    for_each_row(
        label, chunks, KOKKOS_LAMBDA(const int64_t c) {
          T* s = &partial(c, 0);
          const int64_t end = (c + 1) * per < rows ? (c + 1) * per : rows;
          for (int64_t i = c * per; i < end; ++i) fn(i, s);
        });
    constexpr int64_t block = 256;  // columns a thread adds up, contiguous in every partial
    Kokkos::parallel_for(
        label, Range(0, (width + block - 1) / block), KOKKOS_LAMBDA(const int64_t b) {
          const int64_t j0 = b * block, j1 = j0 + block < width ? j0 + block : width;
          T* out = sums.data();
          for (int64_t c = 0; c < chunks; ++c) {
            const T* p = &partial(c, 0);
#pragma GCC ivdep
            for (int64_t j = j0; j < j1; ++j) out[j] += p[j];
          }
        });
  } else {
    Kokkos::parallel_reduce(label, Range(0, rows), RowArrayReduce<T, RowFn>(width, fn), sums);
  }
  return sums;
}

// The sum of chunk_sum(begin, end) over [0, n) split into chunks of `chunk` terms, in
// double: chunk_sum(begin, end) returns the sum of the terms [begin, end) in order.
template <class ChunkSum>
double ordered_sum(const char* label, int64_t n, int64_t chunk, ChunkSum chunk_sum) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  double total = 0;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    std::vector<double> partial(size_t(chunks > 0 ? chunks : 0));
    double* p = partial.data();
    Kokkos::parallel_for(
        label, Range(0, chunks),
        KOKKOS_LAMBDA(const int64_t c) { p[c] = chunk_sum(c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n); });
    for (const double x : partial) total += x;
  } else {
    Kokkos::parallel_reduce(
        label, Range(0, chunks),
        KOKKOS_LAMBDA(const int64_t c, double& acc) {
          acc += chunk_sum(c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
        },
        total);
  }
  return total;
}

}  // namespace strata::kernels
