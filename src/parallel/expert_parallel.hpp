#pragma once
// Expert parallelism (parallel.expert = e): the experts of every mixture-of-experts layer
// are split over e ranks of the data group (and, under a 1D or 3D tensor split of t ranks,
// over the tensor ranks too: e t expert ranks, each tensor rank routing its share of the rows),
// expert rank k holding experts [k E/(e t), (k+1) E/(e t)). A layer's tokens go to the ranks of their experts and back
// by all-to-alls over the expert group (model/moe_layer.hpp); the routing statistics (each expert's share of a global
// micro-batch, the capacity's order) are summed over the ranks whose tokens make up one global micro-batch at this
// stage: the replicas (data x context).
#include "comm/grid.hpp"

namespace strata {

struct ExpertParallel {
  int size = 1, rank = 0;            // e (times t under a 1D or 3D tensor split), and this rank's expert rank
  int data_rank = 0, data_size = 1;  // the data replica (its place in the global micro-batch)
  Comm* experts = nullptr;           // the expert group (null when size = 1)
  Comm* tokens = nullptr;            // the replicas (null: this rank's tokens are the whole micro-batch)
  int token_ranks = 1;               // their number (the planner's dry models have sizes but no communicators)
  bool active() const { return size > 1; }
};

inline ExpertParallel expert_parallel_of(const Grid& grid) {
  ExpertParallel ep;
  ep.size = grid.experts().size();  // parallel.expert, times the 1D or 3D tensor split's ranks
  ep.rank = grid.coords().expert;
  ep.data_rank = grid.data_rank();
  ep.data_size = grid.data_size();
  if (ep.size > 1) ep.experts = &grid.experts();
  if (grid.replicas().size() > 1) ep.tokens = &grid.replicas();
  ep.token_ranks = grid.replicas().size();
  return ep;
}

}  // namespace strata
