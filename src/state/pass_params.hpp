#pragma once
// One pass's walk through ZeRO-3's gather steps (ZeroState::use_params; nothing where the
// parameters are not sharded): before each layer that reads its parameters whole, or, with
// the finer units, where the layer's hooks say (state/unit_hooks.hpp).
#include <functional>

#include "state/stage_units.hpp"
#include "state/unit_hooks.hpp"
#include "state/zero_state.hpp"

namespace strata {

template <class T>
class PassParams {
 public:
  // steps: the pass's (empty where the parameters are not sharded); fine: the finer units,
  // whose vocabulary chunks have chunk_rows rows
  PassParams(ZeroState<T>& zero, ParamSteps steps, bool fine, int64_t chunk_rows)
      : zero_(zero), steps_(std::move(steps)), fine_(fine) {
    hooks_.step = [this] { next(); };
    hooks_.chunk_rows = chunk_rows;
  }
  PassParams(const PassParams&) = delete;
  PassParams& operator=(const PassParams&) = delete;

  void next() { zero_.use_params(steps_, step_++); }
  // Before a layer that reads its parameters whole (the finer units' layers step themselves).
  void layer() {
    if (!fine_) next();
  }
  // The hooks a layer steps through with the finer units, done called as each of its units'
  // gradients is final; nullptr without them.
  const UnitHooks* units(std::function<void(int)> done = {}) {
    if (!fine_) return nullptr;
    hooks_.done = std::move(done);
    return &hooks_;
  }

 private:
  ZeroState<T>& zero_;
  ParamSteps steps_;
  bool fine_;
  size_t step_ = 0;
  UnitHooks hooks_;
};

}  // namespace strata
