#pragma once
// Which points of every MGRIT level each rank holds, as XBraid distributes them: rank r
// holds the fine points (bounds[r], bounds[r+1]] (the steps bounds[r] .. bounds[r+1]-1,
// at least one), and on level l the points i whose fine point i c^l lies in that range,
// i.e. (bounds[r] / c^l, bounds[r+1] / c^l] (integer division). Blocks need not be
// multiples of c: a coarse interval may span ranks, and a rank may hold no point of a
// coarse level (it sits that level out). Point 0 (u_0) belongs to no range; rank 0 keeps
// it on every level. On each level the ranks that hold points, and rank 0, form a chain:
// a rank's left point (its "ghost", point lo) is the last point of the nearest holding
// rank before it, and its last point goes to the nearest holding rank after it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace strata {

class MgritLayout {
 public:
  // bounds: ranks + 1 non-decreasing fine indices from 0 to n_steps, each block >= 1 step.
  MgritLayout(int64_t n_steps, int cfactor, int levels, std::vector<int64_t> bounds)
      : n_(n_steps), c_(cfactor), levels_(levels), bounds_(std::move(bounds)) {
    if (levels_ < 1 || c_ < 2) throw UserError("MGRIT: levels must be >= 1 and cfactor >= 2");
    if (n_ % scale(levels_ - 1) != 0)
      throw UserError("MGRIT: " + std::to_string(n_) + " steps are not a multiple of cfactor^(levels-1) = " +
                      std::to_string(scale(levels_ - 1)) + " (every coarse step must stand for whole fine steps)");
    if (bounds_.size() < 2 || bounds_.front() != 0 || bounds_.back() != n_)
      throw UserError("MGRIT: the rank blocks must cover the steps 0.." + std::to_string(n_ - 1));
    for (size_t r = 0; r + 1 < bounds_.size(); ++r)
      if (bounds_[r + 1] <= bounds_[r])
        throw UserError("MGRIT: " + std::to_string(ranks()) + " ranks need at least as many steps (got " +
                        std::to_string(n_) + "); rank " + std::to_string(r) + " would hold none");
  }
  // The even split: rank r holds steps floor(r N / P) .. floor((r+1) N / P) - 1 (as
  // StagePlacement::balanced places layers).
  static std::vector<int64_t> balanced(int64_t n_steps, int ranks) {
    std::vector<int64_t> b(size_t(ranks) + 1);
    for (int r = 0; r <= ranks; ++r) b[size_t(r)] = n_steps * r / ranks;
    return b;
  }
  // The same blocks seen backwards in time (the adjoint): reversed rank P-1-r holds the
  // reversed points of forward rank r.
  MgritLayout reversed() const {
    std::vector<int64_t> b(bounds_.size());
    for (size_t k = 0; k < b.size(); ++k) b[k] = n_ - bounds_[b.size() - 1 - k];
    return MgritLayout(n_, c_, levels_, b);
  }

  int64_t steps() const { return n_; }
  int cfactor() const { return c_; }
  int levels() const { return levels_; }
  int ranks() const { return int(bounds_.size()) - 1; }
  const std::vector<int64_t>& bounds() const { return bounds_; }
  int64_t scale(int l) const {  // c^l
    int64_t p = 1;
    for (int i = 0; i < l; ++i) p *= c_;
    return p;
  }
  int64_t points(int l) const { return n_ / scale(l); }  // steps on level l

  // rank r's points on level l: (lo, hi]; lo is its ghost
  int64_t lo(int l, int r) const { return bounds_[size_t(r)] / scale(l); }
  int64_t hi(int l, int r) const { return bounds_[size_t(r) + 1] / scale(l); }
  int64_t count(int l, int r) const { return hi(l, r) - lo(l, r); }
  // Local indices (0 = the ghost lo, count = hi) of the C-points of level l (every c-th
  // point, the points of level l + 1) in rank r's block: the first (> count: none) and
  // the last (<= 0: none); and the end of the F-points after local point j (the point
  // before the next C-point, or the block's end).
  int64_t first_c(int l, int r) const { return (lo(l, r) / c_ + 1) * c_ - lo(l, r); }
  int64_t last_c(int l, int r) const { return hi(l, r) / c_ * c_ - lo(l, r); }
  int64_t interval_end(int l, int r, int64_t j) const {
    return std::min(j + c_ - 1 - (lo(l, r) + j) % c_, count(l, r));
  }
  // takes part in level l: holds points there, or is rank 0 (which holds u_0)
  bool active(int l, int r) const { return r == 0 || count(l, r) > 0; }
  // the rank holding r's ghost on level l (-1 for rank 0)
  int prev(int l, int r) const {
    for (int q = r - 1; q >= 0; --q)
      if (active(l, q)) return q;
    return -1;
  }
  // the next rank that holds points on level l (-1: none)
  int next(int l, int r) const {
    for (int q = r + 1; q < ranks(); ++q)
      if (count(l, q) > 0) return q;
    return -1;
  }

 private:
  int64_t n_;
  int c_, levels_;
  std::vector<int64_t> bounds_;
};

}  // namespace strata
