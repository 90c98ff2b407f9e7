#pragma once
// Megatron-LM's 1D split over t ranks: activations replicated (B*T, C); attention heads,
// the MLP's hidden units and the vocabulary split t ways. Megatron pairs its linears: a
// column-parallel one ("in": qkv, fc) whose input is replicated, followed by a
// row-parallel one ("out": proj, fc_proj) whose output needs one all-reduce; so the
// forward all-reduces after each "out" linear, the backward after each "in" linear. The
// embedding is a lookup in this rank's vocabulary rows and one all-reduce; the head a
// local product, with an all-reduce of dx in the backward; the loss's max and sums go
// over the group.
//
// With sequence parallelism (Korthikanti et al. 2022) the replicated regions (the layer
// norms, the residual stream, the embedding's output, the head's input) hold a contiguous
// block of B*T/t rows per rank instead. An "in" linear gathers its input's rows into
// `rows`, a (B*T, C) buffer, and reduce-scatters its input gradient from there; an "out"
// linear reduce-scatters its partial output through `rows` and gathers its output
// gradient into `rows`, which its weight gradient then reads. The same bytes as the
// all-reduces (a ring all-reduce is a reduce-scatter then an all-gather). The layer
// norms' gains see only this rank's rows, so their gradients are summed over the group.
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "comm/traffic.hpp"
#include "parallel/splits/split_calls.hpp"
#include "parallel/splits/split_divisions.hpp"
#include "parallel/splits/split_traits.hpp"
#include "parallel/splits/tensor_part.hpp"

namespace strata {

struct ColumnSplit {
  static constexpr const char* name = "1d";  // as strata plan lists it
  Comm* group = nullptr;                     // the t ranks
  int t = 1, rank = 0;
  bool sequence = false;  // sequence parallelism (parallel.sequence_parallel)

  int row_split() const { return sequence ? t : 1; }
  ColumnSplit placed_on(const Grid& grid) const;  // its communicators and place in them
  SplitTraits traits() const;
  SplitDivisions divisions() const;
  double sum_over_batch_blocks(double loss) const { return loss; }
  Comm* vocab_comm() const { return group; }
  int64_t wte_vocab_begin(int64_t v_local) const { return rank * v_local; }
  int64_t logits_vocab_begin(int64_t v_local) const { return rank * v_local; }
  TensorPart part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const;

  // a mixture's parts of the rows: gathered over the group
  std::vector<SplitGroup> expert_part_groups() const { return {{group, t, "tensor"}}; }
  SplitGroup expert_column_group() const { return {}; }

  STRATA_TENSOR_SPLIT_OPERATIONS

  STRATA_TENSOR_SPLIT_TRAFFIC

 private:
  // (rows, width) summed over the group: each rank's share of every row, all-reduced, or
  // under sequence parallelism reduce-scattered to this rank's rows
  void sum_traffic(Traffic& out, int64_t rows, int64_t width, int64_t e) const;
};

}  // namespace strata
