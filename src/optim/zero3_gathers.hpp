#pragma once
// ZeRO-3 for the planner: what ParamGather (state/param_gather.hpp) does in a step of a
// stage, found by running its rule over the passes the stage runs: at each step of a pass
// the units it reads and those of the next `prefetch` steps are held, every other unit is
// given back (none where the policy keeps them), and a unit not held is gathered (a unit of
// one rank's group never is); after the update every unit is given back. The gathers per unit and the most values the
// slots hold at once follow; the traffic is ZeRO-2's sums plus those gathers, in place of ZeRO-2's one gather after the
// update.
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "model/stage_model.hpp"
#include "state/gradient_slots.hpp"
#include "state/param_gather.hpp"

namespace strata {

struct Zero3Gathers {
  std::vector<int64_t> gathers;  // per unit, in a step
  int64_t slot_values = 0;       // the most values the gathered parameters' slots hold at once
};

// passes: (chunk, backward) in the order the stage runs them in one step.
template <class T>
Zero3Gathers zero3_gathers(const StageFootprint<T>& model, const std::vector<GradientUnit>& units,
                           const std::vector<std::pair<int, bool>>& passes, GatherPolicy policy) {
  Zero3Gathers out;
  out.gathers.assign(units.size(), 0);
  const auto units_of = [&](const std::vector<std::pair<int64_t, int64_t>>& ranges) {
    std::vector<int> found;
    for (const auto& [begin, end] : ranges)
      for (size_t u = 0; u < units.size(); ++u)
        if (end > begin && units[u].from < end && units[u].from + (units[u].used_end - units[u].begin) > begin &&
            std::find(found.begin(), found.end(), int(u)) == found.end())
          found.push_back(int(u));
    return found;
  };
  const auto size = [&](int u) { return units[size_t(u)].end - units[size_t(u)].begin; };
  std::set<int> held;
  int64_t values = 0;
  for (const auto& [chunk, backward] : passes) {
    std::vector<std::vector<int>> steps;
    for (const auto& ranges : model.param_steps(chunk, backward)) steps.push_back(units_of(ranges));
    for (size_t k = 0; k < steps.size(); ++k) {
      std::set<int> keep(steps[k].begin(), steps[k].end());
      for (size_t j = k + 1; j < steps.size() && j <= k + size_t(policy.prefetch); ++j)
        keep.insert(steps[j].begin(), steps[j].end());
      for (auto it = held.begin(); it != held.end();)
        if (policy.keep || keep.count(*it)) {
          ++it;
        } else {
          values -= size(*it);
          it = held.erase(it);
        }
      for (int u : keep)
        if (units[size_t(u)].shards > 1 && held.insert(u).second) {
          ++out.gathers[size_t(u)];
          values += size(u);
          out.slot_values = std::max(out.slot_values, values);
        }
    }
  }
  return out;
}

// The passes of a step without a pipeline: each micro-batch's forward and backward.
inline std::vector<std::pair<int, bool>> data_parallel_passes(int micro_batches) {
  std::vector<std::pair<int, bool>> passes;
  for (int j = 0; j < micro_batches; ++j) passes.insert(passes.end(), {{0, false}, {0, true}});
  return passes;
}

}  // namespace strata
