#pragma once
// No tensor split: every rank of the (size 1) group holds whole tensors, and each
// operation is the serial kernel.
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "comm/traffic.hpp"
#include "parallel/splits/split_calls.hpp"
#include "parallel/splits/split_divisions.hpp"
#include "parallel/splits/split_traits.hpp"
#include "parallel/splits/tensor_part.hpp"

namespace strata {

struct WholeTensors {
  static constexpr const char* name = "none";  // as strata plan lists it
  Comm* group = nullptr;

  WholeTensors placed_on(const Grid&) const { return *this; }
  SplitTraits traits() const { return {}; }
  SplitDivisions divisions() const {
    SplitDivisions d;
    d.heads_name = "tensor_cols";  // (t = 1)
    return d;
  }
  double sum_over_batch_blocks(double loss) const { return loss; }
  Comm* vocab_comm() const { return nullptr; }
  int64_t wte_vocab_begin(int64_t) const { return 0; }
  int64_t logits_vocab_begin(int64_t) const { return 0; }
  TensorPart part_of(const std::vector<int64_t>&, const TensorCuts&) const { return {}; }

  std::vector<SplitGroup> expert_part_groups() const { return {}; }
  SplitGroup expert_column_group() const { return {}; }

  STRATA_TENSOR_SPLIT_OPERATIONS

  STRATA_TENSOR_SPLIT_TRAFFIC  // (none)
};

}  // namespace strata
