#pragma once
// Test helper: the whole model's parameters (or gradients) as one flat host vector in the
// order and global shapes of a serial ParamStore, assembled from the shards of a tensor
// group (each shard contributed once, by its replica 0, and summed over the group).
#include <mpi.h>

#include <utility>
#include <vector>

#include "core/deck.hpp"
#include "state/param_store.hpp"
#include "support/host_views.hpp"
#include "support/mpi_test_helpers.hpp"

namespace strata::test {

// experts: the expert group (the experts' parameters are summed over it as well), or
// MPI_COMM_NULL without expert parallelism; where it spans the tensor group too (a 1D
// split), add_experts on one tensor rank only.
template <class T>
std::vector<double> gather_global(const ParamStore<T>& store, const Tensor1<T>& buffer, MPI_Comm tensor_group,
                                  MPI_Comm experts = MPI_COMM_NULL, bool add_experts = true) {
  const auto local = to_host<T>(buffer);
  std::vector<double> global(size_t(store.table().global_numel()), 0.0), expert(global.size(), 0.0);
  int64_t base = 0;
  for (const auto& p : store.infos()) {
    if (p.replica == 0) {
      const ShardIndex index(p);
      auto& into = p.expert ? expert : global;
      for (int64_t i = 0; i < p.numel; ++i) into[size_t(base + index.global(i))] = double(local[p.offset + i]);
    }
    base += p.global_numel;
  }
  if (experts != MPI_COMM_NULL)
    MPI_Allreduce(MPI_IN_PLACE, expert.data(), int(expert.size()), MPI_DOUBLE, MPI_SUM, experts);
  if (add_experts)
    for (size_t i = 0; i < global.size(); ++i) global[i] += expert[i];
  MPI_Allreduce(MPI_IN_PLACE, global.data(), int(global.size()), MPI_DOUBLE, MPI_SUM, tensor_group);
  return global;
}

// A store's flat parameters: its buffer, or under ZeRO-3 every unit's parts gathered over
// its group (the replicas, or the experts' region over the expert replicas).
template <class T>
Tensor1<T> flat_params(const ParamStore<T>& store, MPI_Comm replicas, MPI_Comm expert_replicas) {
  if (!store.zero().params_sharded()) return store.params();
  const auto owned = to_host<T>(store.param_values());
  const auto& units = store.zero().gradient_slots()->units();
  const int64_t length = units.empty() ? 0 : units.back().end;
  std::vector<T> dense(size_t(length), T(0)), experts(size_t(length), T(0));
  for (const auto& u : units)
    for (int64_t i = 0; i < u.part(); ++i)
      (u.experts ? experts : dense)[size_t(u.begin + u.index * u.part() + i)] = owned[size_t(u.at + i)];
  const MPI_Datatype type = sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
  MPI_Allreduce(MPI_IN_PLACE, dense.data(), int(length), type, MPI_SUM, replicas);
  MPI_Allreduce(MPI_IN_PLACE, experts.data(), int(length), type, MPI_SUM, expert_replicas);
  Tensor1<T> flat("flat_params", length);
  auto host = Kokkos::create_mirror_view(flat);
  for (int64_t i = 0; i < length; ++i) host(i) = dense[size_t(i)] + experts[size_t(i)];
  Kokkos::deep_copy(flat, host);
  return flat;
}

// A job's (test::Training) whole parameters, gathered over its model group.
template <class Job>
std::vector<double> global_params_of(Job& job) {
  const auto& c = job.grid().coords();
  const auto& store = job.model().params();
  return gather_global(store, flat_params(store, job.grid().replicas().raw(), job.grid().expert_replicas().raw()),
                       job.grid().model().raw(), job.grid().experts().raw(), c.row == 0 && c.col == 0);
}

// The reference of an equivalence test: a job (test::Training) of `deck` run on
// world rank 0 alone, and its parameters; default values on the other ranks.
template <class Job>
auto serial_run(const Deck& deck) {
  std::pair<decltype(std::declval<Job&>().run()), std::vector<double>> out;
  if (world_rank() == 0) {
    Job serial(deck, MPI_COMM_SELF, quiet());
    out.first = serial.run();
    out.second = global_params_of(serial);
  }
  return out;
}

}  // namespace strata::test
