#pragma once
// Which part of a parameter a rank holds under a tensor split. A block declares, for
// each parameter, which dimension each split cuts (TensorCuts); the split answers with
// this rank's hyperslab and which copy it is among the ranks that hold the same part.
#include <cstdint>
#include <vector>

namespace strata {

// The dimension each split cuts (-1: none, the part is replicated along that split).
// 1D: `columns`, cut t ways. 2D: `grid_row` and `grid_col`, cut by the grid's row and
// column index. 3D: `x` and `y`, cut by those groups, and which of the two the depth
// group cuts further (a weight's rows).
struct TensorCuts {
  int columns = -1;
  int grid_row = -1, grid_col = -1;
  int x = -1, y = -1, depth = -1;
};

struct TensorPart {
  bool whole = true;  // every rank holds the whole tensor
  std::vector<int64_t> start, count;
  int replica = 0, replicas = 1;

  static TensorPart of_shape(const std::vector<int64_t>& shape) {
    TensorPart p;
    p.whole = false;
    p.start.assign(shape.size(), 0);
    p.count = shape;
    return p;
  }
  // dimension dim in `parts` parts, this rank's `index`
  void cut(int dim, int parts, int index) {
    count[size_t(dim)] /= parts;
    start[size_t(dim)] = index * count[size_t(dim)];
  }
  // the same part over `parts` ranks, this rank's copy `index`
  void replicate(int parts, int index) {
    replica = replica * parts + index;
    replicas *= parts;
  }
  void cut_or_replicate(int dim, int parts, int index) { dim >= 0 ? cut(dim, parts, index) : replicate(parts, index); }
};

}  // namespace strata
