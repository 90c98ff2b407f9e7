#pragma once
// A rank's training state as the deck's ZeRO stage (parallel.zero) lays it out over the
// Grid's replica groups, once the stage's model has declared its parameters: ZeRO-1
// shards the AdamW moments, ZeRO-2 the gradients too, unit by unit (in the order the
// stage's backward finishes them, StageUnits::grad_ready_order), ZeRO-3 the parameters as
// well, each rank drawing its own parts of the initial values; with an expert split the
// experts' state over the expert replicas.
#include <cstdint>

#include "comm/grid.hpp"
#include "core/layout.hpp"
#include "state/param_store.hpp"
#include "state/stage_units.hpp"

namespace strata {

// Whether ZeRO shards the state on this grid (a stage above 0, more than one replica).
bool state_sharded(const Layout& p, const Grid& grid);

// How a store was declared and what its values come from.
struct StateStart {
  uint64_t seed = 0;      // the initial values' (the same global weights on any layout)
  bool declared = false;  // declared without memory: the memory is allocated here
  bool read = false;      // a file fills the values (model.init_from): none is drawn
  bool rounded = false;   // declared: then keeps the bf16 rounded copy (ParamStore::keep_rounded_copy)
};

// The store's memory and rounded copy where it was only declared (ZeRO-3: each rank's
// parts, drawn as they are made; else the whole parameters, with gradients and moments
// unless ZeRO shards them), then ZeRO's sharding.
void lay_out_state(ParamStore<float>& store, const StageUnits<float>& units, const Layout& p, const Grid& grid,
                   const StateStart& start);

}  // namespace strata
