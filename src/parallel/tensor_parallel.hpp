#pragma once
// How the layers of one model replica are split over its tensor group, and the
// communicators that split uses. Blocks read it to choose their parameter shards and
// operators; it does not own the communicators (the trainer or a test does).
//   Serial: every rank of the (size 1) group holds whole tensors.
//   OneD  : Megatron-LM's split over t ranks: activations replicated (B*T, C); attention
//           heads, the MLP's hidden units and the vocabulary split t ways.
//   TwoD  : Optimus' split over a q x q grid: rank (i, j) holds activations
//           [batch block i, hidden block j] and weights [in block i, out block j].
#include "core/parallel_modes.hpp"
#include "parallel/summa.hpp"

namespace strata {

struct TensorParallel {
  TensorMode mode = TensorMode::Serial;
  Comm* group = nullptr;  // every rank of the tensor group (1D: the t ranks; 2D: q*q)
  Comm* row = nullptr;    // 2D: the ranks (i, 0..q-1)
  Comm* col = nullptr;    // 2D: the ranks (0..q-1, j)
  int t = 1, rank = 0;    // 1D: group size and this rank's place in it
  int q = 1, i = 0, j = 0;// 2D: grid side and this rank's (row, column)

  int size() const { return mode == TensorMode::OneD ? t : mode == TensorMode::TwoD ? q * q : 1; }
  TensorGrid2D grid() const { return {*row, *col, q, i, j}; }
};

}  // namespace strata
