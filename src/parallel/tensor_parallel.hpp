#pragma once
// How the layers of one model replica are split over its tensor group: one of the split
// types of parallel/splits/, each behind the same operations (splits/split_calls.hpp),
// traffic declarations and traits. The blocks hold a TensorParallel and never ask which
// split it is. It does not own the communicators (the Grid does).
//
// Adding a split: its type in parallel/splits/ (its operations, traffic and traits), one
// more alternative in `Split` below, and the line in tensor_parallel.cpp that makes it
// from the deck's parallel.tensor_mode.
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "comm/grid.hpp"
#include "core/layout.hpp"
#include "parallel/splits/axonn_split.hpp"
#include "parallel/splits/column_split.hpp"
#include "parallel/splits/optimus_split.hpp"
#include "parallel/splits/whole_tensors.hpp"

namespace strata {

class TensorParallel {
 public:
  using Split = std::variant<WholeTensors, ColumnSplit, OptimusSplit, AxonnSplit>;

  TensorParallel() = default;
  // (implicit: a split is a TensorParallel)
  template <class S, class = std::enable_if_t<std::is_constructible_v<Split, S>>>
  TensorParallel(S split)  // NOLINT(google-explicit-constructor)
      : split_(std::move(split)), traits_(std::visit([](const auto& s) { return s.traits(); }, split_)) {}

  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), split_);
  }
  // the split as type S, or nullptr (tests that build a split by hand read it back)
  template <class S>
  const S* as() const {
    return std::get_if<S>(&split_);
  }

  // which split it is, as an index into Split, and the splits' names in that order
  int kind() const { return int(split_.index()); }
  static std::vector<const char*> kind_names() { return names(std::make_index_sequence<std::variant_size_v<Split>>{}); }
  const char* name() const { return kind_names()[size_t(kind())]; }

  const SplitTraits& traits() const { return traits_; }
  int size() const { return traits_.size; }
  int row_split() const { return traits_.row_split; }
  Comm* group() const {
    return visit([](const auto& s) { return s.group; });
  }
  // the sum of the batch blocks' losses, where ranks of the split hold different blocks
  double sum_over_batch_blocks(double loss) const {
    return visit([&](const auto& s) { return s.sum_over_batch_blocks(loss); });
  }
  void loss_sum_traffic(Traffic& out) const {
    visit([&](const auto& s) { s.loss_sum_traffic(out); });
  }
  // the communicator the vocabulary is split over for the loss (nullptr: not split)
  Comm* vocab_comm() const {
    return visit([](const auto& s) { return s.vocab_comm(); });
  }
  // first vocabulary row of this rank's wte shard (v_local rows), and first vocabulary
  // column of its logits block (v_local columns)
  int64_t wte_vocab_begin(int64_t v_local) const {
    return visit([&](const auto& s) { return s.wte_vocab_begin(v_local); });
  }
  int64_t logits_vocab_begin(int64_t v_local) const {
    return visit([&](const auto& s) { return s.logits_vocab_begin(v_local); });
  }
  // a mixture of experts' parts of the rows (traits().experts), gathered over these groups
  // in turn (each part a block of consecutive rows, the first group's fastest), and the
  // group the residual stream's columns are joined over before routing (size 1: none)
  std::vector<SplitGroup> expert_part_groups() const {
    return visit([](const auto& s) { return s.expert_part_groups(); });
  }
  SplitGroup expert_column_group() const {
    return visit([](const auto& s) { return s.expert_column_group(); });
  }
  // the groups a linear's weight block is gathered over, where the split's linears gather
  // them (traits().gathers_weight_blocks: 3D): in_linear, or an out linear's
  Linear3DGroups weight_block_groups(bool in_linear) const {
    const auto* s = as<AxonnSplit>();
    if (!s) throw std::logic_error("TensorParallel: a weight block gathered under a split that keeps them");
    return in_linear ? s->in_linear() : s->out_linear();
  }
  // what the split divides (a model kind's deck rules)
  SplitDivisions divisions() const {
    return visit([](const auto& s) { return s.divisions(); });
  }
  TensorPart part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const {
    return visit([&](const auto& s) { return s.part_of(shape, cuts); });
  }

 private:
  template <size_t... I>
  static std::vector<const char*> names(std::index_sequence<I...>) {
    return {std::variant_alternative_t<I, Split>::name...};
  }

  Split split_;
  SplitTraits traits_;
};

// The split a layout asks for (none for 1D with one column; 2D even at q = 1, which runs
// the 2D code path on one rank), without communicators: this rank at the split's origin.
// The planner's dry models run on it (every rank of a split holds as much).
TensorParallel tensor_split_of(const Layout& layout);

// The ranks a mixture layer's experts are split over: parallel.expert, times the tensor
// ranks that route the rows (traits().expert_ways: 1D and 3D, each routes a share).
inline int64_t expert_ranks(const Layout& layout) {
  return layout.expert * tensor_split_of(layout).traits().expert_ways;
}

// The grid's split (tensor_split_of its layout) over its tensor communicators.
TensorParallel tensor_parallel_of(const Grid& grid);

}  // namespace strata
