#pragma once
// AxoNN's 3D split over X x Y x Z (parallel/tp3d_linear.hpp): the residual stream is held
// as [batch block z, hidden block x], replicated over Y; heads and the MLP's hidden units
// are split over Y; every weight block is sharded over the depth group Z by rows. An "in"
// linear splits its input over X and its output over Y, an "out" linear the other way
// round; each gathers its weight block over depth before its forward and again before its
// input gradient, through `transfers` (parallel/tp3d_transfers.hpp: the caller prefetches
// the next linear's block there, and finishes the weight gradients' reduce-scatters), and
// w is this rank's shard. The layer norms take their statistics over X (the 2D layer norm
// with X as its grid row and the depth group as its column). The vocabulary is split over
// Y: wte [V, C] as [vocabulary block y, hidden block x].
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "comm/traffic.hpp"
#include "parallel/splits/split_calls.hpp"
#include "parallel/splits/split_divisions.hpp"
#include "parallel/splits/split_traits.hpp"
#include "parallel/splits/tensor_part.hpp"
#include "parallel/summa.hpp"
#include "parallel/tp3d_linear.hpp"

namespace strata {

struct AxonnSplit {
  static constexpr const char* name = "3d";       // as strata plan lists it
  Comm* group = nullptr;                          // the X * Y * Z ranks
  Comm *x = nullptr, *y = nullptr, *z = nullptr;  // the X, Y and depth groups
  int nx = 1, ny = 1, nz = 1, ix = 0, iy = 0, iz = 0;
  bool overlap = true;  // the depth group's transfers in flight (parallel.tensor_overlap)

  // a block's first linears (qkv, fc: input over X, output over Y) and its second ones
  // (proj, fc_proj: the groups swapped)
  Linear3DGroups in_linear() const { return {*x, *y, *z, overlap}; }
  Linear3DGroups out_linear() const { return {*y, *x, *z, overlap}; }
  AxonnSplit placed_on(const Grid& grid) const;
  SplitTraits traits() const;
  SplitDivisions divisions() const;
  // depth rank z has batch block z's losses; the depth group adds up the blocks
  double sum_over_batch_blocks(double loss) const { return nz > 1 ? z->allreduce_sum(loss) : loss; }
  Comm* vocab_comm() const { return y; }
  int64_t wte_vocab_begin(int64_t v_local) const { return iy * v_local; }
  int64_t logits_vocab_begin(int64_t v_local) const { return iy * v_local; }
  TensorPart part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const;

  // a mixture's parts of the rows, y X + x: gathered over X, then the Y bands; the
  // residual stream's columns are joined over X
  std::vector<SplitGroup> expert_part_groups() const;
  SplitGroup expert_column_group() const { return {x, nx, "tensor_x"}; }

  STRATA_TENSOR_SPLIT_OPERATIONS

  STRATA_TENSOR_SPLIT_TRAFFIC

 private:
  // the layer norm's groups as the 2D layer norm takes them (statistics over X, the
  // gains' gradients summed over depth; X need not equal depth, the 2D code reads q only
  // as the row's size)
  TensorGrid2D layernorm_groups() const { return {*x, *z, nx, 0, 0}; }
  void linear_forward_traffic(Traffic& out, const char* in_group, int in_ranks, int64_t rows, int64_t in, int64_t out_w,
                              int64_t e) const;
  void linear_backward_traffic(Traffic& out, const char* out_group, int out_ranks, int64_t rows, int64_t in,
                               int64_t out_w, int64_t e) const;
};

}  // namespace strata
