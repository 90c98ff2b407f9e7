#pragma once
// What ZeRO-2/3 read of a stage to make its units (state/gradient_slots.hpp) and their
// gathers (state/param_gather.hpp): the ranges of the flat buffers whose gradients become
// final together, in the order the backward makes them so, and, for ZeRO-3, the ranges
// each step of a pass reads. A part of StageModel's interface (model/stage_model.hpp).
#include <cstdint>
#include <utility>
#include <vector>

namespace strata {

using FlatRange = std::pair<int64_t, int64_t>;  // [begin, end) of the flat buffers
// ZeRO-3 (ZeroState::use_params): the flat ranges each step of a pass reads, in order.
using ParamSteps = std::vector<std::vector<FlatRange>>;

template <class T>
class StageUnits {
 public:
  virtual ~StageUnits() = default;
  // The flat-gradient ranges the backward hands to on_ready, in its order.
  virtual std::vector<FlatRange> grad_ready_order() const = 0;
  // ZeRO-3: the steps of a chunk's forward or backward; empty: a model that does not name
  // them (it runs zero <= 2).
  virtual ParamSteps param_steps(int /*chunk*/, bool /*backward*/) const { return {}; }
  // ZeRO-2/3's finer units (GPT::use_fine_units): grad_ready_order() is the sequence of ranges
  // the backward names, each written and named in turn (a range named twice: a tied
  // parameter's chunks, after the head and after the embedding).
  virtual bool fine_units() const { return false; }
};

}  // namespace strata
