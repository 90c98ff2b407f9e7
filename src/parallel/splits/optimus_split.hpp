#pragma once
// Optimus' 2D split over a q x q grid (parallel/summa.hpp): rank (i, j) holds the
// activations [batch block i, hidden block j] and the weights [in block i, out block j];
// both kinds of linear are the SUMMA linear, the layer norms take their statistics along
// the grid row. wte [V, C] is held as [vocabulary block i, hidden block j]: the embedding
// looks up all of the replica's tokens in its vocabulary block and reduce-scatters the
// result down grid column j (rank (i, j) keeps batch block i); the head is SUMMA ABT,
// whose logits block (i, j) is [batch block i, vocabulary block j], so the loss reduces
// along grid row i; wpe is split by hidden block j. Even at q = 1 this runs the 2D code.
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "comm/traffic.hpp"
#include "parallel/splits/split_calls.hpp"
#include "parallel/splits/split_divisions.hpp"
#include "parallel/splits/split_traits.hpp"
#include "parallel/splits/tensor_part.hpp"
#include "parallel/summa.hpp"

namespace strata {

struct OptimusSplit {
  static constexpr const char* name = "2d";  // as strata plan lists it
  Comm* group = nullptr;                     // the q * q ranks
  Comm* row = nullptr;                       // the ranks (i, 0..q-1)
  Comm* col = nullptr;                       // the ranks (0..q-1, j)
  int q = 1, i = 0, j = 0;

  TensorGrid2D grid() const { return {*row, *col, q, i, j}; }
  OptimusSplit placed_on(const Grid& grid) const;
  SplitTraits traits() const;
  SplitDivisions divisions() const;
  // grid row i has batch block i's losses; the column adds up the blocks
  double sum_over_batch_blocks(double loss) const { return col->allreduce_sum(loss); }
  Comm* vocab_comm() const { return row; }
  int64_t wte_vocab_begin(int64_t v_local) const { return i * v_local; }
  int64_t logits_vocab_begin(int64_t v_local) const { return j * v_local; }
  TensorPart part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const;

  // (no mixture of experts under this split: divisions().refuses_experts)
  std::vector<SplitGroup> expert_part_groups() const { return {}; }
  SplitGroup expert_column_group() const { return {}; }

  STRATA_TENSOR_SPLIT_OPERATIONS

  STRATA_TENSOR_SPLIT_TRAFFIC
};

}  // namespace strata
