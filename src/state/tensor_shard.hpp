#pragma once
// Which part of a global parameter a rank holds under a tensor split: one line per
// parameter in the blocks says which dimension each split cuts (-1: none, the part is
// replicated along that split).
#include <vector>

#include "parallel/tensor_parallel.hpp"
#include "state/param_table.hpp"

namespace strata {

// 3D: the dimensions X and Y cut (-1: replicated over that group), and which of the two
// the depth group cuts further (a weight's rows: x or y; -1: replicated over depth).
struct Split3D {
  int x = -1, y = -1, depth = -1;
};

// dim_1d: the dimension cut t ways in 1D. row_dim / col_dim: the dimensions cut by the
// grid row index i / column index j in 2D. Serial: the whole tensor.
inline Shard tensor_shard(const TensorParallel& tp, const std::vector<int64_t>& shape, int dim_1d, int row_dim,
                          int col_dim, Split3D three_d = {}) {
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
  if (tp.mode == TensorMode::ThreeD) {
    // a dimension the depth group cuts too is cut in (group x depth) parts, the depth
    // index fastest: this depth rank's rows of the group's block
    const auto cut_3d = [&](int dim, int parts, int index, bool with_depth) {
      if (dim < 0) return replicate(parts, index);
      if (with_depth)
        cut(dim, parts * tp.nz, index * tp.nz + tp.iz);
      else
        cut(dim, parts, index);
    };
    cut_3d(three_d.x, tp.nx, tp.ix, three_d.depth >= 0 && three_d.depth == three_d.x);
    cut_3d(three_d.y, tp.ny, tp.iy, three_d.depth >= 0 && three_d.depth == three_d.y);
    if (three_d.depth < 0) replicate(tp.nz, tp.iz);
  } else if (tp.mode == TensorMode::OneD) {
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
