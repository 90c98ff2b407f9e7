#pragma once
// Multigrid reduction in time (MGRIT) with full approximation storage, as XBraid does it,
// for u_{i+1} = Phi_i(u_i), i = 0..N-1, u_0 given, the steps spread over the ranks of a
// communicator in time order (Falgout et al. 2014; Günther et al., arXiv 1812.04352).
//
// Level l has N / c^l steps; its C-points are every c-th point, which are the points of
// level l + 1, whose step is the problem's step of size c^l h (TimeStepper::step(l, i)).
// One iteration (a V-cycle) on level l: relax (F, or FCF: F-points from their interval's
// C-point, then C-points from their preceding F-point, then F again), compute the
// residual at the C-points, restrict by injection with the FAS right-hand side
//   g_{l+1,k} = r_{l,kc} + v_k - Phi_{l+1}(v_{k-1}),   v = u_l at the C-points,
// solve level l + 1 (recursively; the coarsest level sequentially, rank after rank),
// correct the C-points by u_{l+1} - v, and F-relax. Level 0 relaxes with F or FCF
// (MgritOptions::fcf), the levels above with FCF. Iteration stops when the level-0
// residual norm (2-norm over all C-points and ranks) is below the tolerance, or after
// max_iterations. With one level it is the sequential solve: the serial network.
//
// Each rank holds a contiguous block of points on every level (N divisible by
// ranks * c^(levels-1)) and a copy of the point before its block (a ghost); the only
// messages are one state per block boundary per sweep, sent without blocking.
#include <vector>

#include "comm/comm.hpp"
#include "engine/layerpar/time_stepper.hpp"

namespace strata {

struct MgritOptions {
  int levels = 2;            // 1: sequential solve
  int cfactor = 4;           // coarsening factor c
  int max_iterations = 10;   // V-cycles
  double tolerance = 1e-9;   // on the level-0 residual norm (absolute); 0: run max_iterations
  bool fcf = false;          // level-0 relaxation: FCF (true) or F (false); coarse levels use FCF
};

struct MgritStats {
  int iterations = 0;               // V-cycles run
  std::vector<double> residuals;    // level-0 residual norm before each cycle's coarse solve
  bool converged = false;
  std::vector<int64_t> steps;       // Phi evaluations on this rank, per level (the cost model's unit)
  int64_t messages = 0;             // states this rank sent
  // mean ratio of successive residual norms (the convergence factor); 0 with fewer than 2
  double convergence_factor() const;
};

template <class T>
class Mgrit {
 public:
  // comm: the ranks in time order; n_steps: N fine steps.
  Mgrit(TimeStepper<T>& app, Comm& comm, int64_t n_steps, MgritOptions options);
  const MgritOptions& options() const { return opt_; }

  // Level-0 points this rank holds: global points first_point() + j, j = 0..points();
  // j = 0 is the ghost (the previous rank's last point), or the initial value u_0 on
  // rank 0. The states are the solver's initial guess before solve() (warm start: leave
  // them from the last solve) and the solution after it.
  int64_t first_point() const { return rank_ * block(0); }
  int64_t points() const { return block(0); }
  V1<T> point(int64_t j) { return state(levels_[0].u, j); }

  // Sets every point but u_0 to zero (a cold start).
  void zero_guess();
  // Iterates from the current points (rank 0's point 0 must hold u_0); afterwards every
  // rank's ghost holds its left neighbour's final last point.
  MgritStats solve();

 private:
  struct Level {
    Tensor1<T> u, g, v;   // (block + 1) states each: points, FAS right-hand side, restricted values
    bool has_rhs = false; // level 0 has none (g = 0)
  };
  int64_t block(int l) const { return block0_ / pow_c(l); }
  int64_t pow_c(int l) const;
  V1<T> state(Tensor1<T>& buf, int64_t j) { return V1<T>(buf.data() + j * size_, size_); }
  // u_j = Phi(u_{j-1}) + g_j at local point j of level l
  void advance(int l, int64_t j);
  void exchange_ghost(int l);
  void f_relax(int l);
  void c_relax(int l);
  void relax(int l, bool fcf);
  // residual at the C-points into level l+1's rhs (and the squared norm of it), restriction
  double restrict_to(int l);
  void correct_from(int l);
  void cycle(int l);
  void sequential_solve(int l);

  TimeStepper<T>& app_;
  Comm& comm_;
  MgritOptions opt_;
  int rank_ = 0, ranks_ = 1;
  int64_t n_ = 0, size_ = 0, block0_ = 0;
  std::vector<Level> levels_;
  Tensor1<T> tmp_;                // one state of scratch
  std::vector<T> send_buf_, recv_buf_;
  MgritStats* stats_ = nullptr;   // the solve in progress (counts steps and messages)
  void phi(int level, int64_t i, V1<const T> in, V1<T> out);
};

}  // namespace strata
