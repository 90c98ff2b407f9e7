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
// The points are spread as MgritLayout says (any contiguous blocks of at least one step;
// N a multiple of c^(levels-1)): each rank holds its block of every level and a copy of
// the point before it (a ghost). The messages are one state per block boundary per sweep,
// sent without blocking: a rank whose last point is a C-point sends it as the sweep
// starts; otherwise its last interval spans into the next rank, so it relaxes that
// interval first and sends its last F-point then (an interval spread over several ranks
// is relaxed along them in turn). The FAS right-hand side needs the previous coarse
// point; where a block does not start at a C-point, that takes one more message.
#include <vector>

#include "comm/comm.hpp"
#include "engine/layer_parallel/mgrit_layout.hpp"
#include "engine/layer_parallel/time_stepper.hpp"

namespace strata {

struct MgritOptions {
  int levels = 2;           // 1: sequential solve
  int cfactor = 4;          // coarsening factor c
  int max_iterations = 10;  // V-cycles
  double tolerance = 1e-9;  // on the level-0 residual norm (absolute); 0: run max_iterations
  bool fcf = false;         // level-0 relaxation: FCF (true) or F (false); coarse levels use FCF
};

struct MgritStats {
  int iterations = 0;             // V-cycles run
  std::vector<double> residuals;  // level-0 residual norm before each cycle's coarse solve
  bool converged = false;
  std::vector<int64_t> steps;  // Phi evaluations on this rank, per level (the cost model's unit)
  int64_t messages = 0;        // states this rank sent
  // mean ratio of successive residual norms (the convergence factor); 0 with fewer than 2
  double convergence_factor() const;
};

template <class T>
class Mgrit {
 public:
  // comm: the ranks in time order; n_steps: N fine steps, split evenly over the ranks
  // (MgritLayout::balanced), or into the given blocks (bounds: ranks + 1 fine indices).
  Mgrit(TimeStepper<T>& app, Comm& comm, int64_t n_steps, MgritOptions options, std::vector<int64_t> bounds = {});
  const MgritOptions& options() const { return opt_; }
  const MgritLayout& layout() const { return layout_; }

  // Level-0 points this rank holds: global points first_point() + j, j = 0..points();
  // j = 0 is the ghost (the previous rank's last point), or the initial value u_0 on
  // rank 0. The states are the solver's initial guess before solve() (warm start: leave
  // them from the last solve) and the solution after it.
  int64_t first_point() const { return layout_.lo(0, rank_); }
  int64_t points() const { return layout_.count(0, rank_); }
  V1<T> point(int64_t j) { return state(levels_[0].u, j); }

  // Bytes of the states this rank holds on every level.
  int64_t bytes() const {
    int64_t b = view_bytes(tmp_);
    for (const auto& l : levels_) b += view_bytes(l.u, l.g, l.v);
    return b;
  }
  // Sets every point but u_0 to zero (a cold start).
  void zero_guess();
  // Iterates from the current points (rank 0's point 0 must hold u_0); afterwards every
  // rank's ghost holds its left neighbour's final last point.
  MgritStats solve();

 private:
  struct Level {
    Tensor1<T> u, g, v;    // (block + 1) states each: points, FAS right-hand side, restricted values
    bool has_rhs = false;  // level 0 has none (g = 0)
  };
  int64_t lo(int l) const { return layout_.lo(l, rank_); }
  int64_t count(int l) const { return layout_.count(l, rank_); }
  int64_t first_c(int l) const { return layout_.first_c(l, rank_); }
  V1<T> state(Tensor1<T>& buf, int64_t j) { return V1<T>(buf.data() + j * size_, size_); }
  // u_j = Phi(u_{j-1}) + g_j at local point j of level l
  void advance(int l, int64_t j);
  // the F-points after local C-point (or ghost) j, up to the next C-point or the block end
  void advance_interval(int l, int64_t j);
  // starts sending buf's local point j of level l to the next rank of the chain
  Comm::Request start_send(int l, Tensor1<T>& buf, int64_t j, int tag);
  // from the previous rank of the chain into buf's ghost: start, then finish
  Comm::Request start_receive(int l, int tag);
  void finish_receive(Comm::Request& req, Tensor1<T>& buf);
  // every active rank's ghost of level l gets its left neighbour's last point
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
  int64_t size_ = 0;
  MgritLayout layout_;
  std::vector<Level> levels_;
  Tensor1<T> tmp_;                      // one state of scratch
  std::vector<T> send_buf_, recv_buf_;  // one state each, host side
  MgritStats* stats_ = nullptr;         // the solve in progress (counts steps and messages)
  void phi(int level, int64_t i, V1<const T> in, V1<T> out);
};

}  // namespace strata
