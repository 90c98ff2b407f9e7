#pragma once
// The ranks an update talks to, read off the Grid and the parameters' declarations once
// when a job is built (OptimizerStep takes them).
#include "comm/grid.hpp"
#include "state/param_store.hpp"

namespace strata {

struct OptimizerGroups {
  // the ranks over which one model replica's gradient norm is summed (pipeline x tensor)
  Comm* model = nullptr;
  // ZeRO-1 (a store whose moments are sharded): the data group that holds the other
  // blocks (optim/zero_sharding.hpp)
  Comm* zero = nullptr;
  // expert parallelism: the ranks that hold the other experts (their gradients' squares
  // are summed over it; with ZeRO-1 the replicas' sum covers them), and those that hold
  // the same experts (ZeRO-1 gathers the experts' region over it)
  Comm* experts = nullptr;
  Comm* expert_replicas = nullptr;
};

template <class T>
OptimizerGroups optimizer_groups(const Grid& grid, const ParamStore<T>& params) {
  OptimizerGroups g;
  g.model = &grid.model();
  if (params.zero().moments_sharded()) g.zero = &grid.replicas();
  // the data group's part of the expert split; the expert group itself when no tensor
  // rank is an expert rank (the same ranks, the communicator the planner counts)
  if (grid.shape().expert > 1)
    g.experts = grid.experts().size() == grid.expert_data_ranks().size() ? &grid.experts() : &grid.expert_data_ranks();
  g.expert_replicas = &grid.expert_replicas();
  return g;
}

}  // namespace strata
