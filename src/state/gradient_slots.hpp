#pragma once
// ZeRO-2's gradients (ParamStore::shard_gradients): the flat layout is cut into units,
// ranges whose gradients become final together (a model's blocks, its embedding, its
// final layer norm, the experts' region), each padded to its group's size. A rank keeps
// only its part of every unit's summed gradient (ParamStore's owned gradients, in the
// order of its AdamW moments); a unit's whole gradient exists only while a backward
// writes it, in a slot taken (zeroed) at its first write and given back once the engine
// has reduce-scattered it (optim/unit_gradient_sum.hpp). A slot is as large as its unit,
// so a backward holds a few units' gradients at a time, not the model's.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

struct GradientUnit {
  int64_t from = 0;            // where its values began in the unsharded layout
  int64_t begin = 0, end = 0;  // [begin, end) of the flat buffers, padded: (end - begin) % shards == 0
  int64_t used_end = 0;        // where its parameters end (the rest is padding)
  bool experts = false;        // summed over the expert replicas (else over the replicas)
  bool named = false;          // one of the ready ranges (else summed once per step, at the end)
  int shards = 1, index = 0;   // its group's size and this rank's part
  int64_t at = 0;              // where this rank's part lies in the owned gradients and moments
  int64_t part() const { return (end - begin) / shards; }
};

// The units of a flat buffer of `total` values whose experts' region starts at
// expert_begin, from the ranges whose gradients become final together (any order, a range
// possibly named twice; the other ranges before expert_begin and the experts' region become units of their own), in
// flat order and laid out anew: each padded to its group's parts (the experts' region to
// expert_shards parts when expert_shards > 0, else to shards), this rank's part index and
// its place among the parts it keeps.
std::vector<GradientUnit> gradient_units(std::vector<std::pair<int64_t, int64_t>> ready_ranges, int64_t expert_begin,
                                         int64_t total, int shards, int index, int expert_shards = 0,
                                         int expert_index = 0);

template <class T>
class GradientSlots {
 public:
  // owned: this rank's parts (ParamStore's owned gradients), where a unit of a group of one
  // rank is written directly: its part is all of it, with no sum to wait for.
  GradientSlots(std::vector<GradientUnit> units, T* owned);
  const std::vector<GradientUnit>& units() const { return units_; }
  // The unit that holds flat element `offset`.
  int unit_at(int64_t offset) const;
  // The gradients of flat elements [offset, offset + n), which lie in one unit: its slot,
  // taken (and zeroed) at the first call (a unit of one rank's group: its owned part).
  V1<T> values(int64_t offset, int64_t n);
  // Unit u's whole (padded) gradient, taken if it has no slot yet.
  V1<T> slot(int u);
  bool holds(int u) const { return slot_of_[size_t(u)] >= 0; }
  // Unit u's slot handed over (to a sum in flight): u has none from now on (its next write
  // takes another), the slot stays taken until free_slot(slot). -1 when u has none.
  int detach(int u);
  V1<T> slot_values_of(int slot) const { return V1<T>(slots_[size_t(slot)].data(), slots_[size_t(slot)].extent(0)); }
  void free_slot(int slot);
  // The most slots held at once so far, and the most values they held at once (a slot is
  // allocated when taken and freed when given back: units differ in size, and pools by
  // size would keep the largest of each at once where the peak holds fewer).
  int slots_allocated() const { return most_slots_; }
  int64_t slot_values() const { return most_values_; }

 private:
  std::vector<GradientUnit> units_;
  T* owned_ = nullptr;
  std::vector<int> slot_of_;       // per unit: its slot, or -1
  std::vector<Tensor1<T>> slots_;  // (an empty one: free)
  int held_ = 0, most_slots_ = 0;
  int64_t values_ = 0, most_values_ = 0;
};

}  // namespace strata
