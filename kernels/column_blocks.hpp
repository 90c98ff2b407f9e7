#pragma once
// A row-major matrix as column blocks: the blocks an all-gather over the ranks that split
// the columns returns, joined into whole rows, and one rank's block taken out of whole
// rows (the 3D split's residual stream: model/moe_layer.hpp).
#include "core/tensor.hpp"

namespace strata::kernels {

// dst (N, C) from `blocks`: C / W blocks of (N, W) one after another, block p holding
// columns [p W, (p + 1) W).
template <class T>
void join_column_blocks(V2<T> dst, V1<const T> blocks, int64_t width) {
  const int64_t n = dst.extent(0), c = dst.extent(1);
  Kokkos::parallel_for(
      "join_column_blocks", Range(0, n), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t k = 0; k < c; ++k) dst(r, k) = blocks((k / width) * n * width + r * width + k % width);
      });
}

// dst (N, W) = the columns [first, first + W) of src (N, C).
template <class T>
void copy_column_block(V2<T> dst, V2<const T> src, int64_t first) {
  const int64_t w = dst.extent(1);
  Kokkos::parallel_for(
      "copy_column_block", Range(0, dst.extent(0)), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t k = 0; k < w; ++k) dst(r, k) = src(r, first + k);
      });
}

}  // namespace strata::kernels
