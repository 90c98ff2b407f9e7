#pragma once
// ZeRO-2's gradient sum (a store whose gradients are sharded: ParamStore::shard_gradients):
// as the backward reports a unit's gradients final, its slot is reduce-scattered over the
// unit's group (the replicas, or for the experts' region the expert replicas), and this
// rank's part of the sum is added to its owned gradients; the slot is given back once the
// sum completes. One sum stays in flight while the next unit's gradients are made (MPI
// moves it inside the MPI calls the backward makes meanwhile); its slot is the only one
// held beyond those being written. The same bytes as the all-reduce's reduce-scatter half.
#include <algorithm>
#include <deque>
#include <map>
#include <vector>

#include "comm/comm.hpp"
#include "comm/traffic.hpp"
#include "kernels/residual.hpp"
#include "model/stage_model.hpp"
#include "state/param_store.hpp"

namespace strata {

// The units ZeRO-2 lays a stage's store out in over `data_ranks` replicas (with expert
// parallelism of e ranks, parallel.expert, the experts' region over data_ranks / e of
// them): what ParamStore::shard_gradients makes of the unsharded store, for the planner.
template <class T>
std::vector<GradientUnit> zero2_units(const StageFootprint<T>& model, int data_ranks) {
  const auto& store = model.params();
  const auto& tp = model.tensor_parallel();  // (1D and 3D tensor ranks are expert ranks too)
  const int e = std::max(1, store.table().expert_split() / tp.traits().expert_ways);
  return gradient_units(model.grad_ready_order(), store.expert_begin(), store.numel(), data_ranks, 0,
                        e > 1 ? data_ranks / e : 0, 0);
}

// The tied wte's unit where the stage runs both the head and the embedding (-1 elsewhere):
// the backward names it twice, after the head and after the embedding, so that its head's
// part is summed at once rather than held in a slot through every block's backward.
template <class T>
int tied_unit_named_twice(const StageFootprint<T>& model, const std::vector<GradientUnit>& units) {
  const auto& place = model.placement();
  if (model.params().table().tied_index() < 0 || !place.first() || !place.last()) return -1;
  const int64_t from = model.params().infos()[size_t(model.params().table().tied_index())].offset;
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].from == from) return int(u);
  return -1;
}

// The units the backward names twice a micro-batch: the tied wte's (tied_unit_named_twice),
// or with finer units the chunks of it that grad_ready_order() lists twice.
template <class T>
std::vector<int> units_named_twice(const StageFootprint<T>& model, const std::vector<GradientUnit>& units) {
  if (!model.fine_units()) {
    const int wte = tied_unit_named_twice(model, units);
    return wte >= 0 ? std::vector<int>{wte} : std::vector<int>{};
  }
  std::vector<int> named(units.size(), 0), twice;
  for (const auto& [begin, end] : model.grad_ready_order())
    for (size_t u = 0; u < units.size(); ++u)
      if (end > begin && units[u].from == begin && ++named[u] == 2) twice.push_back(int(u));
  return twice;
}

// A stage's backwards in the order it runs them, as the slots see them: whole, or split
// into an input half (the zero-bubble schedules' B: it writes the layer norms' gradients of
// every block and of the final norm, naming none final) and a weight half (W: the rest,
// naming each unit final as a whole backward does).
enum class BackwardPart { Whole, Input, Weight };
inline std::vector<BackwardPart> whole_backwards(int micro_batches) {
  return std::vector<BackwardPart>(size_t(micro_batches), BackwardPart::Whole);
}

// The values ZeRO-2's slots hold at most at once in a step of `model` (UnitGradientSum
// over GradientSlots, each slot allocated when taken and freed when its sum completes),
// found by running its order over the stage's `backwards`: each backward (or input half)
// first writes the units it names last or not at all (the tied wte where the head runs
// too; the experts' region and the last stage's copy of wte, summed once at the end), an
// input half every unit it writes too (all but the embedding's), then (a whole backward, a
// weight half) in the order the model makes them final each unit is taken and handed to
// its sum, which completes the sum before it (one in flight); a unit written again while
// its sum is in flight takes another slot. So under the zero-bubble schedules a unit's slot
// lives from a micro-batch's input half to its weight half, gathering the input halves of
// the micro-batches between.
template <class T>
int64_t zero2_slot_values(const StageFootprint<T>& model, const std::vector<GradientUnit>& units,
                          const std::vector<BackwardPart>& backwards) {
  const auto size = [&](int u) { return units[size_t(u)].end - units[size_t(u)].begin; };
  const auto unit_from = [&](int64_t from) {
    for (size_t u = 0; u < units.size(); ++u)
      if (units[u].from == from) return int(u);
    return -1;
  };
  std::vector<int> order;
  for (const auto& [begin, end] : model.grad_ready_order())
    if (end > begin) order.push_back(unit_from(begin));
  const bool fine = model.fine_units();  // the sequence the backward names, each unit written just before
  const int wte = fine ? -1 : tied_unit_named_twice(model, units);
  if (wte >= 0) order.insert(order.begin() + 1, wte);  // after the final norm's
  std::vector<bool> held(units.size(), false), posted(units.size(), false);
  int64_t values = 0, most = 0;  // held by the slots, now and at most
  // a write: the unit's slot, if it has none (a unit of one rank's group: its owned part)
  const auto take = [&](int u) {
    if (held[size_t(u)] || units[size_t(u)].shards == 1) return;
    held[size_t(u)] = true;
    most = std::max(most, values += size(u));
  };
  std::deque<int64_t> in_flight;  // the sums' slots, by size
  const auto post = [&](int u) {  // its slot handed to the sum; completing the one before frees that one
    posted[size_t(u)] = true;
    if (units[size_t(u)].shards == 1) return;
    take(u);
    held[size_t(u)] = false;
    in_flight.push_back(size(u));
    if (in_flight.size() > 1) {
      values -= in_flight.front();
      in_flight.pop_front();
    }
  };
  // written at each backward's start: the tied wte where the head runs too (named after the
  // head, and again after the embedding), and every unit the backward writes but does not
  // name (the experts' region, the last stage's copy of wte; summed once, at the end); the
  // embedding's backward writes its two units (wte and wpe, named last) before naming either
  const size_t embedding = !fine && model.params().table().tied_index() >= 0 && model.placement().first() ? 2 : 0;
  for (const BackwardPart part : backwards) {
    if (part != BackwardPart::Weight) {
      if (wte >= 0) take(wte);
      for (size_t u = 0; u < units.size(); ++u)
        if (!units[u].named && units[u].end > units[u].begin) take(int(u));
    }
    if (part == BackwardPart::Input) {
      for (size_t k = 0; k + embedding < order.size(); ++k) take(order[k]);
      continue;
    }
    for (size_t k = 0; k < order.size(); ++k) {
      if (k + embedding == order.size())
        for (size_t e = k; e < order.size(); ++e) take(order[e]);
      post(order[k]);
    }
  }
  for (size_t u = 0; u < units.size(); ++u)
    if (!posted[u]) post(int(u));
  return most;
}

// What ZeRO-2 sends per step (comm/traffic.hpp): every unit reduce-scattered over its
// group (the named ones each micro-batch, the others once), the norm's squares summed over
// the replicas, every unit's updated parameters all-gathered (a unit of one rank's group:
// nothing); ZeRO-3: each unit gathered `gathers[u]` times instead (optim/zero3_gathers.hpp).
// named_twice: the units summed twice a micro-batch (units_named_twice).
inline void zero2_traffic(Traffic& out, const std::vector<GradientUnit>& units, int data_ranks, int micro_batches,
                          int64_t value_bytes, const std::vector<int>& named_twice,
                          const std::vector<int64_t>* gathers = nullptr) {
  const auto group = [](const GradientUnit& u) { return u.experts ? "expert_data" : "data"; };
  for (size_t k = 0; k < units.size(); ++k) {
    const auto& u = units[k];
    const bool twice = std::find(named_twice.begin(), named_twice.end(), int(k)) != named_twice.end();
    if (u.shards > 1)
      out.add(group(u), "reduce_scatter", Collective::ReduceScatter, u.shards, u.part() * value_bytes,
              u.named ? (twice ? 2 : 1) * micro_batches : 1);
  }
  out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, sizeof(double));
  for (size_t k = 0; k < units.size(); ++k) {
    const auto& u = units[k];
    const int64_t calls = gathers ? (*gathers)[k] : 1;
    if (u.shards > 1 && calls > 0)
      out.add(group(u), "allgather", Collective::AllGather, u.shards, u.part() * value_bytes, calls);
  }
}

template <class T>
class UnitGradientSum {
 public:
  UnitGradientSum(Comm& data, Comm& expert_data, ParamStore<T>& store)
      : data_(data), expert_data_(expert_data), store_(store), slots_(*store.zero().gradient_slots()),
        summed_(slots_.units().size(), false) {}
  // (Sums still in flight here mean an exception: they are left to the job's end, not
  // waited for, since the ranks that would complete them may never post them.)
  UnitGradientSum(const UnitGradientSum&) = delete;
  UnitGradientSum& operator=(const UnitGradientSum&) = delete;

  // The units that begin in [offset, offset + count) are final (a GradReadyFn).
  void ready(int64_t offset, int64_t count) {
    if (count <= 0) return;
    const auto& units = slots_.units();
    for (int u = slots_.unit_at(offset); u < int(units.size()) && units[size_t(u)].begin < offset + count; ++u) post(u);
  }
  // This rank's part of parameter i's summed gradient: the parts of the units it spans
  // (one, or ZeRO-3's vocabulary chunks of the tied wte), which follow each other.
  V1<T> owned_grads_of(int i) const {
    const auto& p = store_.infos()[size_t(i)];
    const auto& units = slots_.units();
    const auto& first = units[size_t(slots_.unit_at(p.offset))];
    const auto& last = units[size_t(slots_.unit_at(p.offset + p.numel - 1))];
    return V1<T>(store_.zero().owned_grads(first).data(), last.at + last.part() - first.at);
  }
  // The units no ready() named in this step (in flat order: the same on every rank; they
  // gathered every micro-batch's gradients in their slots), then every sum completed.
  void finish() {
    for (int u = 0; u < int(summed_.size()); ++u)
      if (!summed_[size_t(u)]) post(u);
    while (!in_flight_.empty()) complete();
    summed_.assign(summed_.size(), false);
  }

 private:
  struct InFlight {
    int unit = 0, slot = -1;
    Comm* group = nullptr;
    Comm::Request request;
  };
  void post(int u) {
    summed_[size_t(u)] = true;
    const auto& unit = slots_.units()[size_t(u)];
    if (unit.shards == 1) return;  // written into its owned part directly: nothing to sum
    slots_.slot(u);                // (a unit nobody wrote: zeros)
    InFlight f;
    f.unit = u;
    f.slot = slots_.detach(u);  // the unit's next writes (another micro-batch's) take another slot
    const V1<T> slot = slots_.slot_values_of(f.slot);
    f.group = unit.experts ? &expert_data_ : &data_;
    f.request = f.group->start_reduce_scatter_blocks(slot);
    in_flight_.push_back(std::move(f));
    if (in_flight_.size() > 1) complete();
  }
  // the oldest sum: waited for, this rank's part (its block of the slot) added to its owned gradients
  void complete() {
    InFlight f = std::move(in_flight_.front());
    in_flight_.pop_front();
    f.group->wait(f.request, "reduce_scatter");
    const auto& unit = slots_.units()[size_t(f.unit)];
    const V1<const T> part(slots_.slot_values_of(f.slot).data() + unit.index * unit.part(), unit.part());
    kernels::residual_accumulate<T>(store_.zero().owned_grads(unit), part);
    slots_.free_slot(f.slot);
  }

  Comm& data_;
  Comm& expert_data_;
  ParamStore<T>& store_;
  GradientSlots<T>& slots_;
  std::vector<bool> summed_;
  std::deque<InFlight> in_flight_;
};

}  // namespace strata
