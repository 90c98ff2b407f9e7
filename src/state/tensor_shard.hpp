#pragma once
// Which part of a global parameter a rank holds under a tensor split: one line per
// parameter in the blocks says which dimension each split cuts (-1: none, the part is
// replicated along that split).
#include <vector>

#include "parallel/tensor_parallel.hpp"
#include "state/param_table.hpp"

namespace strata {

// dim_1d: the dimension cut t ways in 1D. row_dim / col_dim: the dimensions cut by the
// grid row index i / column index j in 2D. three_d: the dimensions X and Y cut, and
// which of the two the depth group cuts further (parallel/splits/tensor_part.hpp).
struct Split3D {
  int x = -1, y = -1, depth = -1;
};

inline Shard tensor_shard(const TensorParallel& tp, const std::vector<int64_t>& shape, int dim_1d, int row_dim,
                          int col_dim, Split3D three_d = {}) {
  const TensorPart part = tp.part_of(shape, {dim_1d, row_dim, col_dim, three_d.x, three_d.y, three_d.depth});
  Shard s;
  if (part.whole) return s;
  s.start = part.start, s.count = part.count;
  s.replica = part.replica, s.replicas = part.replicas;
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
