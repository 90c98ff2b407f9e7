#include "engine/layer_parallel/mgrit_cost.hpp"

#include <algorithm>

namespace strata {
namespace {

// The solve's schedule on all ranks; every phase walks the ranks in time order, so a
// message's arrival is known before its receiver needs it.
class Replay {
 public:
  Replay(const MgritLayout& layout, const MgritOptions& o, double t_step, double t_message)
      : lay_(layout), o_(o), ts_(t_step), tm_(t_message), ranks_(layout.ranks()), clock_(size_t(ranks_), 0.0),
        arrival_(size_t(ranks_), 0.0) {
    cost_.steps.assign(size_t(ranks_), std::vector<int64_t>(size_t(o.levels), 0));
    cost_.messages.assign(size_t(ranks_), 0);
  }

  MgritCost run() {
    if (o_.levels == 1) {
      sequential_solve(0);
    } else {
      for (int it = 0; it < o_.max_iterations; ++it) {
        relax(0, o_.fcf);
        restrict_to(0);
        barrier();  // the residual norm
        cycle(1);
        f_relax(0);
      }
    }
    exchange_ghost(0);
    cost_.time = *std::max_element(clock_.begin(), clock_.end());
    return cost_;
  }

 private:
  int64_t lo(int l, int r) const { return lay_.lo(l, r); }
  int64_t count(int l, int r) const { return lay_.count(l, r); }
  // F-points after local point j up to the next C-point or the block end
  int64_t interval(int l, int r, int64_t j) const { return std::max<int64_t>(0, lay_.interval_end(l, r, j) - j); }
  void work(int l, int r, double& t, int64_t steps) {
    cost_.steps[size_t(r)][size_t(l)] += steps;
    t += double(steps) * ts_;
  }
  void send(int l, int r, double t) {
    const int to = lay_.next(l, r);
    if (to < 0) return;
    arrival_[size_t(to)] = t + tm_;
    ++cost_.messages[size_t(r)];
  }
  void receive(int l, int r, double& t) {
    if (lay_.prev(l, r) >= 0 && count(l, r) > 0) t = std::max(t, arrival_[size_t(r)]);
  }
  void barrier() { std::fill(clock_.begin(), clock_.end(), *std::max_element(clock_.begin(), clock_.end())); }

  void f_relax(int l) {
    const int64_t c = o_.cfactor;
    for (int r = 0; r < ranks_; ++r) {
      if (!lay_.active(l, r)) continue;
      double& t = clock_[size_t(r)];
      const int64_t n = count(l, r), first = lay_.first_c(l, r), last_c = lay_.last_c(l, r);
      const bool last_is_c = last_c == n;
      if (last_is_c) send(l, r, t);
      if (!last_is_c && first <= n) {
        work(l, r, t, interval(l, r, last_c));
        send(l, r, t);
      }
      for (int64_t j = first; j <= n && j < last_c + (last_is_c ? 1 : 0); j += c) work(l, r, t, interval(l, r, j));
      receive(l, r, t);
      if (first > 1) work(l, r, t, interval(l, r, 0));
      if (!last_is_c && first > n) send(l, r, t);
    }
  }
  void c_relax(int l) {
    for (int r = 0; r < ranks_; ++r) work(l, r, clock_[size_t(r)], count(l + 1, r));  // one per C-point held
  }
  void relax(int l, bool fcf) {
    f_relax(l);
    if (!fcf) return;
    c_relax(l);
    f_relax(l);
  }
  void restrict_to(int l) {
    for (int r = 0; r < ranks_; ++r) {
      double& t = clock_[size_t(r)];
      const int to = lay_.next(l + 1, r);
      if (lay_.active(l + 1, r) && to >= 0 && lo(l, to) % o_.cfactor != 0) send(l + 1, r, t);
      if (lo(l, r) % o_.cfactor != 0) receive(l + 1, r, t);
      const int64_t coarse = count(l + 1, r);  // the residual (level l) and the FAS term (level l + 1)
      work(l, r, t, coarse);
      work(l + 1, r, t, coarse);
    }
  }
  void sequential_solve(int l) {
    for (int r = 0; r < ranks_; ++r) {
      if (!lay_.active(l, r)) continue;
      double& t = clock_[size_t(r)];
      receive(l, r, t);
      work(l, r, t, count(l, r));
      send(l, r, t);
    }
  }
  void cycle(int l) {
    if (l == o_.levels - 1) {
      sequential_solve(l);
      return;
    }
    relax(l, true);
    restrict_to(l);
    cycle(l + 1);
    f_relax(l);
  }
  void exchange_ghost(int l) {
    for (int r = 0; r < ranks_; ++r) {
      if (!lay_.active(l, r)) continue;
      send(l, r, clock_[size_t(r)]);
      receive(l, r, clock_[size_t(r)]);
    }
  }

  const MgritLayout& lay_;
  MgritOptions o_;
  double ts_, tm_;
  int ranks_;
  std::vector<double> clock_, arrival_;
  MgritCost cost_;
};

}  // namespace

MgritCost mgrit_cost(const MgritLayout& layout, const MgritOptions& options, double t_step, double t_message) {
  return Replay(layout, options, t_step, t_message).run();
}

double layer_parallel_seconds(int64_t steps, int ranks, const MgritOptions& forward, const MgritOptions& backward,
                              const LayerStepTimes& t) {
  const double message = ranks > 1 ? t.message : 0.0;
  const MgritLayout fwd(steps, forward.cfactor, forward.levels, MgritLayout::balanced(steps, ranks));
  const MgritLayout bwd(steps, backward.cfactor, backward.levels, fwd.bounds());
  int64_t largest = 0;
  for (int r = 0; r < ranks; ++r) largest = std::max(largest, fwd.count(0, r));
  return t.open + t.close + mgrit_cost(fwd, forward, t.forward, message).time +
         mgrit_cost(bwd.reversed(), backward, t.adjoint, message).time + double(largest) * t.gradient;
}

}  // namespace strata
