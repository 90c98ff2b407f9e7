#pragma once
// How the layers of one model replica are split over its tensor group, and the
// communicators that split uses. Blocks read it to choose their parameter shards and
// operators; it does not own the communicators (the Grid does).
//   Serial: every rank of the (size 1) group holds whole tensors.
//   OneD  : Megatron-LM's split over t ranks: activations replicated (B*T, C); attention
//           heads, the MLP's hidden units and the vocabulary split t ways. With sequence
//           parallelism (Korthikanti et al. 2022) the replicated regions (layer norms, the
//           residual stream, the embedding's output, the LM head's input) hold a
//           contiguous block of B*T/t rows per rank instead: gathered before the
//           column-parallel linears, reduce-scattered after the row-parallel ones.
//   TwoD  : Optimus' split over a q x q grid: rank (i, j) holds activations
//           [batch block i, hidden block j] and weights [in block i, out block j].
//   ThreeD: AxoNN's split over X x Y x Z (parallel/tp3d_linear.hpp): the residual stream
//           [batch block z, hidden block x], replicated over Y; heads and the MLP's hidden
//           units split over Y; every weight block sharded over Z by rows.
#include "comm/grid.hpp"
#include "core/deck_choices.hpp"
#include "parallel/summa.hpp"
#include "parallel/tp3d_linear.hpp"

namespace strata {

struct TensorParallel {
  TensorMode mode = TensorMode::Serial;
  Comm* group = nullptr;                          // every rank of the tensor group (1D: the t ranks; 2D: q*q)
  Comm* row = nullptr;                            // 2D: the ranks (i, 0..q-1)
  Comm* col = nullptr;                            // 2D: the ranks (0..q-1, j)
  int t = 1, rank = 0;                            // 1D: group size and this rank's place in it
  bool sequence = false;                          // 1D: sequence parallelism (parallel.sequence_parallel)
  int q = 1, i = 0, j = 0;                        // 2D: grid side and this rank's (row, column)
  Comm *x = nullptr, *y = nullptr, *z = nullptr;  // 3D: the X, Y and depth groups
  int nx = 1, ny = 1, nz = 1, ix = 0, iy = 0, iz = 0;
  bool overlap = true;  // 3D: the depth group's transfers in flight (parallel.tensor_overlap)

  int size() const {
    return mode == TensorMode::OneD     ? t
           : mode == TensorMode::TwoD   ? q * q
           : mode == TensorMode::ThreeD ? nx * ny * nz
                                        : 1;
  }
  // How many ways the replicated regions' rows are split: t under sequence parallelism.
  int row_split() const { return mode == TensorMode::OneD && sequence ? t : 1; }
  TensorGrid2D grid() const { return {*row, *col, q, i, j}; }
  // 3D: a block's first linears (qkv, fc: input over X, output over Y) and its second
  // ones (proj, fc_proj: the groups swapped).
  Linear3DGroups in_linear() const { return {*x, *y, *z, overlap}; }
  Linear3DGroups out_linear() const { return {*y, *x, *z, overlap}; }
};

// The split a layout asks for (Serial for 1D with one column; 2D even at q = 1, which
// runs the 2D code path on one rank), without communicators: this rank at the split's
// origin. The planner's dry models run on it (every rank of a split holds as much).
inline TensorParallel tensor_split_of(const Layout& p) {
  TensorParallel tp;
  tp.mode = p.tensor_split();
  if (tp.mode == TensorMode::ThreeD) {
    tp.nx = int(p.tensor_x), tp.ny = int(p.tensor_y), tp.nz = int(p.tensor_depth);
    tp.overlap = p.tensor_overlap;
  } else if (tp.mode == TensorMode::TwoD) {
    tp.q = int(p.tensor_rows);
  } else if (tp.mode == TensorMode::OneD) {
    tp.t = int(p.tensor_cols);
    tp.sequence = p.sequence_parallel;
  }
  return tp;
}

// The grid's split (tensor_split_of its layout) over its tensor communicators.
inline TensorParallel tensor_parallel_of(const Grid& grid) {
  TensorParallel tp = tensor_split_of(grid.shape());
  if (tp.mode == TensorMode::Serial) return tp;
  tp.group = &grid.tensor();
  if (tp.mode == TensorMode::ThreeD) {
    tp.x = grid.tensor_x(), tp.y = grid.tensor_y(), tp.z = grid.tensor_depth();
    tp.ix = grid.coords().x, tp.iy = grid.coords().y, tp.iz = grid.coords().depth;
  } else if (tp.mode == TensorMode::TwoD) {
    tp.row = &grid.tensor_row(), tp.col = &grid.tensor_col();
    tp.i = grid.coords().row, tp.j = grid.coords().col;
  } else {
    tp.rank = grid.coords().col;
  }
  return tp;
}

}  // namespace strata
