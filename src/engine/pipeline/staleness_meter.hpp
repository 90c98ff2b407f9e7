#pragma once
// XPipe's staleness, measured on a real run: for every forward and backward pass of a
// stage, the distance between the weights the pass ran on and the weights the stage holds
// at the pass's target event, `s` updates later (s from the schedule: when the first
// stage finishes the pass's step), relative to the norm of the latter. The current
// (unpredicted) weights are measured the same way in the same run, so with prediction on
// the two means compare the predicted and the stale weights on one trajectory. With
// s = 0 a pass runs on its target weights and both distances are 0.
#include <cmath>
#include <vector>

#include "core/tensor.hpp"
#include "kernels/row_reduce.hpp"

namespace strata {

struct StalenessSummary {
  int64_t passes = 0;      // passes measured (those whose target the run reached)
  int64_t ahead = 0;       // of which with s > 0
  double sum_used = 0;     // sum over passes of |W_used - W_target| / |W_target|
  double sum_current = 0;  // the same for the current weights at the pass (no prediction)
  double mean_used() const { return ahead > 0 ? sum_used / double(ahead) : 0.0; }        // over s > 0
  double mean_current() const { return ahead > 0 ? sum_current / double(ahead) : 0.0; }  // over s > 0
};

// |used - target| / |target| over the elements outside [skip_begin, skip_end).
// (A free function: CUDA lambdas may not live in private member functions.)
template <class T>
double staleness_relative_distance(V1<const T> used, V1<const T> target, int64_t skip_begin, int64_t skip_end) {
  // in an order fixed by the length (kernels/row_reduce.hpp)
  const int64_t n = used.extent(0);
  const double diff = kernels::ordered_sum(
      "staleness_distance", n, 4096, KOKKOS_LAMBDA(int64_t b, int64_t e) {
        double s = 0;
        for (int64_t i = b; i < e; ++i) {
          const double x = i >= skip_begin && i < skip_end ? 0.0 : double(used(i)) - double(target(i));
          s += x * x;
        }
        return s;
      });
  const double ref = kernels::ordered_sum(
      "staleness_reference", n, 4096, KOKKOS_LAMBDA(int64_t b, int64_t e) {
        double s = 0;
        for (int64_t i = b; i < e; ++i)
          s += i >= skip_begin && i < skip_end ? 0.0 : double(target(i)) * double(target(i));
        return s;
      });
  return ref > 0 ? std::sqrt(diff / ref) : 0.0;
}

template <class T>
class StalenessMeter {
 public:
  // skip: [begin, end) of the flat parameter buffer left out (a copy of the tied
  // embedding, which follows another stage's versions).
  void set_skipped(int64_t begin, int64_t end) { skip_ = {begin, end}; }

  // A pass runs on `used` now, while the stage's true weights are `current` (the same
  // without prediction) at version `version`; its target is `steps` updates ahead.
  void record(V1<const T> used, V1<const T> current, int64_t version, int steps) {
    if (steps == 0) {
      ++summary_.passes;
      return;
    }
    pending_.push_back({copy(used), copy(current), version + steps});
  }
  // The stage reached `version` (after an update) and holds `now`.
  void reached(V1<const T> now, int64_t version) {
    for (size_t k = 0; k < pending_.size();) {
      if (pending_[k].target != version) {
        ++k;
        continue;
      }
      summary_.sum_used += relative_distance(pending_[k].used, now);
      summary_.sum_current += relative_distance(pending_[k].current, now);
      ++summary_.ahead;
      ++summary_.passes;
      pending_.erase(pending_.begin() + k);
    }
  }
  // Passes whose target lies beyond the stream are dropped (their distance is unknown).
  const StalenessSummary& summary() const { return summary_; }

 private:
  struct Pending {
    Tensor1<T> used, current;
    int64_t target;
  };
  static Tensor1<T> copy(V1<const T> v) {
    Tensor1<T> c(Kokkos::view_alloc(Kokkos::WithoutInitializing, "staleness.copy"), v.extent(0));
    Kokkos::deep_copy(c, v);
    return c;
  }
  double relative_distance(V1<const T> used, V1<const T> target) const {
    return staleness_relative_distance<T>(used, target, skip_.first, skip_.second);
  }
  std::pair<int64_t, int64_t> skip_{0, 0};
  std::vector<Pending> pending_;
  StalenessSummary summary_;
};

}  // namespace strata
