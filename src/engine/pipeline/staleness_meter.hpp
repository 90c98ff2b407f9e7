#pragma once
// XPipe's staleness, measured on a real run: for every forward and backward pass of a
// stage, the distance between the weights the pass ran on (predicted, or the current ones
// without prediction) and the weights the stage holds at the pass's target event, `s`
// updates later (s from the schedule: when the first stage finishes the pass's
// mini-batch), relative to the norm of the latter. With s = 0 both are the current
// weights and the distance is 0.
#include <cmath>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

struct StalenessSummary {
  int64_t passes = 0;         // passes measured (those whose target the run reached)
  int64_t ahead = 0;          // of which with s > 0
  double sum_relative = 0;    // sum of |W_used - W_target| / |W_target| over the passes with s > 0
  double mean_ahead() const { return ahead > 0 ? sum_relative / double(ahead) : 0.0; }
  double mean_all() const { return passes > 0 ? sum_relative / double(passes) : 0.0; }
};

template <class T>
class StalenessMeter {
 public:
  // skip: [begin, end) of the flat parameter buffer left out (a copy of the tied
  // embedding, which follows another stage's versions).
  void set_skipped(int64_t begin, int64_t end) { skip_ = {begin, end}; }

  // A pass runs on `used` now; the stage holds version `version` and the target is
  // `steps` updates ahead.
  void record(V1<const T> used, int64_t version, int steps) {
    if (steps == 0) {  // the pass runs on its target weights
      ++summary_.passes;
      return;
    }
    Pending p{Tensor1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "staleness.used"), used.extent(0)),
              version + steps};
    Kokkos::deep_copy(p.used, used);
    pending_.push_back(std::move(p));
  }
  // The stage reached `version` (after an update) and holds `now`.
  void reached(V1<const T> now, int64_t version) {
    for (size_t k = 0; k < pending_.size();) {
      if (pending_[k].target != version) {
        ++k;
        continue;
      }
      summary_.sum_relative += relative_distance(pending_[k].used, now);
      ++summary_.ahead;
      ++summary_.passes;
      pending_.erase(pending_.begin() + k);
    }
  }
  // Passes whose target lies beyond the run are dropped (their distance is unknown).
  const StalenessSummary& summary() const { return summary_; }

 private:
  struct Pending {
    Tensor1<T> used;
    int64_t target;
  };
  double relative_distance(V1<const T> used, V1<const T> target) const {
    double diff = 0, ref = 0;
    const int64_t b = skip_.first, e = skip_.second;
    Kokkos::parallel_reduce(
        "staleness_distance", Range(0, used.extent(0)),
        KOKKOS_LAMBDA(const int64_t i, double& d, double& r) {
          if (i >= b && i < e) return;
          const double t = double(target(i)), x = double(used(i)) - t;
          d += x * x;
          r += t * t;
        },
        diff, ref);
    return ref > 0 ? std::sqrt(diff / ref) : 0.0;
  }
  std::pair<int64_t, int64_t> skip_{0, 0};
  std::vector<Pending> pending_;
  StalenessSummary summary_;
};

}  // namespace strata
