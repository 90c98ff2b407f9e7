#pragma once
// ZeRO-3's parameters (ParamStore::shard_parameters): a rank keeps only its part of every
// unit (state/gradient_slots.hpp: the ranges the model uses and makes final together, each
// padded to its group), in the order of its AdamW moments. A unit's whole parameters
// exist only while a pass uses them: the model names, step by step, the units it is about
// to read (ZeroState::use_params), and this gathers them over the unit's group (the
// replicas, or the experts' region over the expert replicas) into a slot, having posted
// the gathers of the next `prefetch` steps before the current one computes, and gives back
// the slots of units no longer in that window. A slot is as large as its unit. A unit of
// a group of one rank is read from the rank's part itself. Every rank of a group names the same steps in the same
// order, so the gathers (collectives) match.
#include <deque>
#include <map>
#include <vector>

#include "comm/comm.hpp"
#include "core/deck.hpp"
#include "core/tensor.hpp"
#include "state/gradient_slots.hpp"

namespace strata {

// How long gathered parameters live: `prefetch` steps' gathers posted ahead of the current
// one; with `keep`, no unit given back before the update (release_all): one gather per unit
// per step instead of one per pass that reads it (two per micro-batch), for the stage's
// whole parameters held through the step.
struct GatherPolicy {
  int prefetch = 1;
  bool keep = false;
};
inline GatherPolicy gather_policy(const Layout& p) { return {int(p.zero_prefetch), p.zero_keep_params}; }

template <class T>
class ParamGather {
 public:
  // owned: this rank's parts (ParamStore's owned parameters, at each unit's `at`).
  ParamGather(const std::vector<GradientUnit>& units, T* owned, Comm& data, Comm& expert_data, GatherPolicy policy);
  ParamGather(const ParamGather&) = delete;
  ParamGather& operator=(const ParamGather&) = delete;
  // (Gathers still in flight here mean an exception: they are left to the job's end, not
  // waited for, since the ranks that would complete them may never post them.)

  // The parameters of flat elements [offset, offset + n), whose unit a step has gathered.
  V1<T> values(int64_t offset, int64_t n) const;
  // A step of a pass: the units of `now` gathered (waited for), those of the next steps in
  // `ahead` (up to `prefetch` of them) posted, every other unit's slot given back (none
  // with `keep`).
  void step(const std::vector<int>& now, const std::vector<std::vector<int>>& ahead);
  // Every gathered unit given back (the owned parts changed: an update, a read), after
  // the gathers in flight complete.
  void release_all();
  int prefetch() const { return policy_.prefetch; }
  // The most slots held at once so far, and the most values they held at once (a slot is
  // allocated when its gather is posted and freed when given back: units differ in size,
  // and pools by size would keep the largest of each at once, the tied embedding's among
  // them, where the peak holds fewer).
  int slots_allocated() const { return most_slots_; }
  int64_t slot_values() const { return most_values_; }

 private:
  struct Held {
    Tensor1<T> slot;
    Comm::Request request;  // the gather, while in flight
    Comm* group = nullptr;
  };
  void post(int u);
  void wait(int u);
  void give_back(int u);

  std::vector<GradientUnit> units_;
  T* owned_ = nullptr;
  Comm& data_;
  Comm& expert_data_;
  GatherPolicy policy_;
  std::map<int, Held> held_;  // by unit: gathered or in flight
  int64_t values_ = 0, most_values_ = 0;
  int most_slots_ = 0;
};

}  // namespace strata
