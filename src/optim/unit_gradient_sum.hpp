#pragma once
// ZeRO-2's gradient sum (a store whose gradients are sharded: ParamStore::shard_gradients):
// as the backward reports a unit's gradients final, its slot is reduce-scattered over the
// unit's group (the replicas, or for the experts' region the expert replicas), and this
// rank's part of the sum is added to its owned gradients; the slot is given back once the
// sum completes. One sum stays in flight while the next unit's gradients are made (MPI
// moves it inside the MPI calls the backward makes meanwhile); its slot is the only one
// held beyond those being written. The same bytes as the all-reduce's reduce-scatter half.
#include <deque>
#include <map>
#include <vector>

#include "comm/comm.hpp"
#include "comm/traffic.hpp"
#include "kernels/residual.hpp"
#include "model/param_store.hpp"
#include "model/stage_model.hpp"

namespace strata {

// The units ZeRO-2 lays a stage's store out in over `data_ranks` replicas (with expert
// parallelism of e ranks, the experts' region over data_ranks / e of them): what
// ParamStore::shard_gradients makes of the unsharded store, for the planner.
template <class T>
std::vector<GradientUnit> zero2_units(const StageFootprint<T>& model, int data_ranks, int expert_split) {
  const auto& store = model.params();
  return gradient_units(model.grad_ready_order(), store.expert_begin(), store.numel(), data_ranks, 0,
                        expert_split > 1 ? data_ranks / expert_split : 0, 0);
}

// The values ZeRO-2's slots hold at most in a backward of `model` (UnitGradientSum over
// GradientSlots, whose slots are reused by units of the same size): the units taken long
// before they are final, held throughout (the embedding where the head that ties it runs
// on the same stage: its gradient starts there; the experts' region: summed after the
// whole backward), and in the order the model makes them final, each unit taken once the
// one before is posted, with one sum in flight; the units nobody names, at the end.
template <class T>
int64_t zero2_slot_values(const StageFootprint<T>& model, const std::vector<GradientUnit>& units) {
  const auto& place = model.placement();
  const int64_t expert_begin = model.params().expert_begin();
  const auto size = [&](int u) { return units[size_t(u)].end - units[size_t(u)].begin; };
  const auto unit_from = [&](int64_t from) {
    for (size_t u = 0; u < units.size(); ++u)
      if (units[u].from == from) return int(u);
    return -1;
  };
  std::vector<int> order;
  for (const auto& [begin, end] : model.grad_ready_order())
    if (end > begin) order.push_back(unit_from(begin));
  std::vector<bool> held(units.size(), false), posted(units.size(), false);
  std::map<int64_t, int> count, peak;
  const auto take = [&](int u) {
    if (held[size_t(u)]) return;
    held[size_t(u)] = true;
    peak[size(u)] = std::max(peak[size(u)], ++count[size(u)]);
  };
  const auto release = [&](int u) {
    held[size_t(u)] = false;
    --count[size(u)];
  };
  const bool tied_here = model.tied_index() >= 0 && place.first() && place.last();
  if (tied_here && !order.empty()) take(order.back());  // the embedding, last to be final
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].from >= expert_begin && units[u].end > units[u].begin) take(int(u));
  std::deque<int> in_flight;
  const auto post = [&](int u) {
    take(u);
    posted[size_t(u)] = true;
    in_flight.push_back(u);
    if (in_flight.size() > 1) {
      release(in_flight.front());
      in_flight.pop_front();
    }
  };
  for (int u : order) post(u);
  for (size_t u = 0; u < units.size(); ++u)
    if (!posted[u]) post(int(u));
  int64_t values = 0;
  for (const auto& [n, most] : peak) values += n * most;
  return values;
}

// What ZeRO-2 sends per step (comm/traffic.hpp): every unit reduce-scattered over its group
// each micro-batch, the norm's squares summed over the replicas, every unit's updated
// parameters all-gathered.
inline void zero2_traffic(Traffic& out, const std::vector<GradientUnit>& units, int data_ranks, int micro_batches,
                          int64_t value_bytes) {
  const auto group = [](const GradientUnit& u) { return u.experts ? "expert_data" : "data"; };
  for (const auto& u : units)
    out.add(group(u), "reduce_scatter", Collective::ReduceScatter, u.shards, u.part() * value_bytes, micro_batches);
  out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, sizeof(double));
  for (const auto& u : units) out.add(group(u), "allgather", Collective::AllGather, u.shards, u.part() * value_bytes);
}

template <class T>
class UnitGradientSum {
 public:
  UnitGradientSum(Comm& data, Comm& expert_data, ParamStore<T>& store)
      : data_(data), expert_data_(expert_data), store_(store), slots_(*store.gradient_slots()),
        summed_(slots_.units().size(), false) {}
  ~UnitGradientSum() {
    for (auto& f : in_flight_) f.group->wait(f.request, "reduce_scatter");  // (after an exception: nothing dangles)
  }
  UnitGradientSum(const UnitGradientSum&) = delete;
  UnitGradientSum& operator=(const UnitGradientSum&) = delete;

  // The units that begin in [offset, offset + count) are final (a GradReadyFn).
  void ready(int64_t offset, int64_t count) {
    const auto& units = slots_.units();
    for (int u = slots_.unit_at(offset); u < int(units.size()) && units[size_t(u)].begin < offset + count; ++u) post(u);
  }
  // The units no ready() named (in flat order: the same on every rank), then every sum
  // completed; ready for the next backward.
  void finish() {
    for (int u = 0; u < int(summed_.size()); ++u)
      if (!summed_[size_t(u)]) post(u);
    while (!in_flight_.empty()) complete();
    summed_.assign(summed_.size(), false);
  }

 private:
  struct InFlight {
    int unit = 0;
    Comm* group = nullptr;
    Comm::Request request;
    typename V1<T>::HostMirror host;
  };
  void post(int u) {
    summed_[size_t(u)] = true;
    const auto& unit = slots_.units()[size_t(u)];
    const V1<T> slot = slots_.slot(u);  // (a unit nobody wrote: zeros)
    InFlight f;
    f.unit = u;
    f.group = unit.experts ? &expert_data_ : &data_;
    Kokkos::fence();
    f.host = Kokkos::create_mirror_view(slot);  // the slot itself where the host can read it
    Kokkos::deep_copy(f.host, slot);
    f.request = f.group->start_reduce_scatter_in_place(f.host.data(), unit.part());
    in_flight_.push_back(std::move(f));
    if (in_flight_.size() > 1) complete();
  }
  // the oldest sum: waited for, this rank's part (block 0 of the slot) added to its owned gradients
  void complete() {
    InFlight f = std::move(in_flight_.front());
    in_flight_.pop_front();
    f.group->wait(f.request, "reduce_scatter");
    const auto& unit = slots_.units()[size_t(f.unit)];
    const V1<T> slot = slots_.slot(f.unit);
    const V1<T> part(slot.data(), unit.part());
    Kokkos::deep_copy(part, Kokkos::subview(f.host, std::make_pair(int64_t(0), unit.part())));
    kernels::residual_accumulate<T>(store_.owned_grads(unit), V1<const T>(part));
    slots_.release(f.unit);
  }

  Comm& data_;
  Comm& expert_data_;
  ParamStore<T>& store_;
  GradientSlots<T>& slots_;
  std::vector<bool> summed_;
  std::deque<InFlight> in_flight_;
};

}  // namespace strata
