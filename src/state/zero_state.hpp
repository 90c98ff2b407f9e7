#pragma once
// What ZeRO shards of a rank's training state, beside the parameters and gradients that
// ParamStore keeps: the AdamW moments (of every flat element, or ZeRO-1's block of them),
// ZeRO-2's units with this rank's part of each unit's summed gradient and the units'
// working slots (state/gradient_slots.hpp), ZeRO-3's parts of each unit's parameters and
// their gathers (state/param_gather.hpp). ParamStore lays its flat buffers out anew through
// it (shard_moments, lay_out_units) and reads its parameters and gradients through the
// slots and gathers while they exist.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "state/gradient_slots.hpp"
#include "state/param_gather.hpp"
#include "state/param_table.hpp"

namespace strata {

// ZeRO-1's block of a flat buffer of `numel` values split over `shards` ranks: equal
// blocks, the last padded (so reduce-scatters and all-gathers need no counts).
inline int64_t zero_block(int64_t numel, int shards) { return (numel + shards - 1) / shards; }
// Values a store of numel values holds: parameters and gradients (padded to `shards`
// blocks) and the AdamW moments of one block; 4 numel without ZeRO-1 (shards = 1).
inline int64_t store_values(int64_t numel, int shards) { return 2 * zero_block(numel, shards) * (shards + 1); }

// The AdamW moments' spans: flat elements [begin, end) have their moments at [at, at + end - begin).
struct MomentSpan {
  int64_t begin = 0, end = 0, at = 0;
};

template <class T>
class ZeroState {
 public:
  // The moments of every one of `total` flat elements (no ZeRO).
  void keep_all_moments(int64_t total);
  // ZeRO stage 1: the flat buffers (params, grads) are padded with zeros to `shards` equal
  // blocks (zero_block) and this rank keeps the AdamW moments of block `index` only;
  // every parameter and gradient stays. expert_shards > 0 (expert parallelism): the
  // parameters before the table's expert_begin() are padded to `shards` blocks and the
  // experts' after them to `expert_shards` blocks (their own group, the expert replicas),
  // and the rank keeps block `index` of the first and block `expert_index` of the second.
  void shard_moments(ParamTable& table, Tensor1<T>& params, Tensor1<T>& grads, int shards, int index, int expert_shards,
                     int expert_index);
  // ZeRO stages 2 and 3: the flat buffers laid out unit by unit (the ranges whose
  // gradients become final together, `ready_ranges`; the other ranges and the experts'
  // region are units of their own), each padded to its group's size; this rank keeps part
  // `index` (`expert_index`) of every unit's summed gradient and moments. Stage 2
  // (seed empty): every parameter, relaid in params. Stage 3: only this rank's part of
  // each unit's parameters (owned_params), drawn from the RNG with `seed`; params empty.
  void lay_out_units(ParamTable& table, Tensor1<T>& params, Tensor1<T>& grads,
                     const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                     int expert_shards, int expert_index, std::optional<uint64_t> seed);
  // ZeRO stage 3, after lay_out_units: a unit's whole parameters gathered while a pass
  // uses it, over `data` (the experts' region over `expert_data`) as `policy` says.
  void gather_parameters(Comm& data, Comm& expert_data, GatherPolicy policy);
  // A step of a pass (ZeRO-3; nothing otherwise): the units that hold the flat ranges of
  // steps[k] gathered for reading, those of the next steps posted (as many as the
  // prefetch depth), the others given back. Every rank of a replica group names the same
  // steps.
  void use_params(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& steps, size_t k);

  // ZeRO-2's units and their working slots (nullptr otherwise).
  GradientSlots<T>* gradient_slots() const { return slots_.get(); }
  bool gradients_sharded() const { return bool(slots_); }
  // ZeRO-3's gathers (nullptr otherwise).
  const ParamGather<T>* param_gather() const { return gather_.get(); }
  bool params_sharded() const { return bool(gather_); }
  bool moments_sharded() const { return moment_shards_ > 1 || expert_shards_ > 1; }

  Tensor1<T>& adam_m() { return m_; }
  Tensor1<T>& adam_v() { return v_; }
  const std::vector<MomentSpan>& moment_spans() const { return spans_; }
  // The parts of tensor p whose moments this rank keeps, in flat order (none: empty); a
  // tensor lies in one span, or under ZeRO-2/3's finer units (the tied wte's vocabulary
  // chunks) in one per unit, whose moments follow each other.
  std::vector<MomentSpan> moment_parts(const ParamInfo& p) const;
  // ZeRO-2: this rank's part of unit's summed gradient; all of them.
  V1<T> owned_grads(const GradientUnit& unit) const { return V1<T>(owned_grads_.data() + unit.at, unit.part()); }
  const Tensor1<T>& owned_grads() const { return owned_grads_; }
  // ZeRO-3: this rank's part of every unit's parameters (at each unit's `at`), for writing:
  // the units gathered so far are given back first.
  Tensor1<T>& owned_params() {
    if (gather_) gather_->release_all();
    return owned_params_;
  }
  const Tensor1<T>& owned_params() const { return owned_params_; }
  // ZeRO-1's equal blocks: [begin, end) of the flat buffers split over the replicas (the
  // whole padded buffer, or with two regions the first) or, experts = true, over the
  // expert replicas (with two regions the second; else empty).
  std::pair<int64_t, int64_t> block_region(bool experts) const { return experts ? expert_region_ : dense_region_; }
  // values held: moments, owned gradients and parameters, slots, gathered slots
  int64_t moment_values() const { return int64_t(m_.extent(0) + v_.extent(0)); }
  int64_t slot_values() const { return slots_ ? slots_->slot_values() : 0; }
  int64_t gathered_values() const { return gather_ ? gather_->slot_values() : 0; }

 private:
  void keep_unit_moments(const std::vector<GradientUnit>& units, int64_t owned, int shards, int expert_shards);
  int moment_shards_ = 1, expert_shards_ = 0;
  std::pair<int64_t, int64_t> dense_region_{0, 0}, expert_region_{0, 0};
  std::vector<MomentSpan> spans_;
  Tensor1<T> m_, v_;
  Tensor1<T> owned_grads_;                   // ZeRO-2: this rank's part of each unit's summed gradient
  std::unique_ptr<GradientSlots<T>> slots_;  // ZeRO-2: the units' working gradients
  Tensor1<T> owned_params_;                  // ZeRO-3: this rank's part of each unit's parameters
  std::unique_ptr<ParamGather<T>> gather_;   // ZeRO-3: the units' gathered parameters
};

}  // namespace strata
