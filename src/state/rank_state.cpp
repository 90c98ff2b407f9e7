#include "state/rank_state.hpp"

#include <stdexcept>

#include "state/param_gather.hpp"

namespace strata {

bool state_sharded(const Layout& p, const Grid& grid) { return p.zero > 0 && grid.replicas().size() > 1; }

void lay_out_state(ParamStore<float>& store, const StageUnits<float>& units, const Layout& p, const Grid& grid,
                   const StateStart& start) {
  const bool sharded = state_sharded(p, grid);
  if (start.declared) {
    if (sharded && p.zero == 3)
      store.defer_values(start.seed);  // drawn into each rank's parts
    else
      store.allocate(start.seed, !sharded, !start.read);
    if (start.rounded) store.keep_rounded_copy();
  }
  if (!sharded) return;
  const bool experts = grid.shape().expert > 1;
  const int expert_shards = experts ? grid.expert_replicas().size() : 0,
            expert_index = experts ? grid.expert_replicas().rank() : 0;
  if (p.zero >= 2 && grid.shape().mgrit())
    throw std::logic_error("lay_out_state: ZeRO-2/3 with MGRIT (the deck check refuses it)");
  const int shards = grid.replicas().size(), index = grid.replicas().rank();
  if (p.zero == 1) store.shard_moments(shards, index, expert_shards, expert_index);
  if (p.zero == 2) store.shard_gradients(units.grad_ready_order(), shards, index, expert_shards, expert_index);
  if (p.zero == 3)
    store.shard_parameters(units.grad_ready_order(), shards, index, expert_shards, expert_index, grid.replicas(),
                           grid.expert_replicas(), gather_policy(p));
}

}  // namespace strata
