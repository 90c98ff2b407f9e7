#pragma once
// Which part of a global parameter a rank holds under a tensor split: one line per
// parameter in the blocks says which dimension each split cuts (-1: none, the part is
// replicated along that split).
#include <vector>

#include "model/param_store.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

// dim_1d: the dimension cut t ways in 1D. row_dim / col_dim: the dimensions cut by the
// grid row index i / column index j in 2D. Serial: the whole tensor.
inline Shard tensor_shard(const TensorParallel& tp, const std::vector<int64_t>& shape, int dim_1d, int row_dim,
                          int col_dim) {
  Shard s;
  if (tp.mode == TensorMode::Serial) return s;
  s.start.assign(shape.size(), 0);
  s.count = shape;
  const auto cut = [&](int dim, int parts, int index) {
    s.count[dim] = shape[dim] / parts;
    s.start[dim] = index * s.count[dim];
  };
  const auto replicate = [&](int parts, int index) {
    s.replica = s.replica * parts + index;
    s.replicas *= parts;
  };
  if (tp.mode == TensorMode::OneD) {
    if (dim_1d >= 0)
      cut(dim_1d, tp.t, tp.rank);
    else
      replicate(tp.t, tp.rank);
  } else {
    if (row_dim >= 0)
      cut(row_dim, tp.q, tp.i);
    else
      replicate(tp.q, tp.i);
    if (col_dim >= 0)
      cut(col_dim, tp.q, tp.j);
    else
      replicate(tp.q, tp.j);
  }
  return s;
}

// A parameter another pipeline stage holds: declared here too, so every rank knows the
// whole model's names and shapes (checkpoints are written collectively), but empty.
inline Shard not_held(const std::vector<int64_t>& shape) {
  Shard s;
  s.start.assign(shape.size(), 0);
  s.count.assign(shape.size(), 0);
  return s;
}

}  // namespace strata
