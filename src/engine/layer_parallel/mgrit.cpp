#include "engine/layer_parallel/mgrit.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace strata {

double MgritStats::convergence_factor() const {
  double sum = 0;
  int n = 0;
  for (size_t k = 1; k < residuals.size(); ++k)
    if (residuals[k - 1] > 0) {
      sum += residuals[k] / residuals[k - 1];
      ++n;
    }
  return n > 0 ? sum / n : 0.0;
}

namespace {
// message tags: ghost states per level, the FAS coarse ghost, the sequential solve
constexpr int kGhostTag = 0, kRestrictTag = 100, kSolveTag = 200;
}  // namespace

template <class T>
Mgrit<T>::Mgrit(TimeStepper<T>& app, Comm& comm, int64_t n_steps, MgritOptions options, std::vector<int64_t> bounds)
    : app_(app), comm_(comm), opt_(options), rank_(comm.rank()), ranks_(comm.size()), size_(app.state_size()),
      layout_(n_steps, options.cfactor, options.levels,
              bounds.empty() ? MgritLayout::balanced(n_steps, comm.size()) : std::move(bounds)) {
  if (opt_.max_iterations < 1) throw UserError("MGRIT: iterations must be >= 1");
  if (layout_.ranks() != ranks_)
    throw std::logic_error("MGRIT: the layout has " + std::to_string(layout_.ranks()) + " blocks for " +
                           std::to_string(ranks_) + " ranks");
  levels_.resize(size_t(opt_.levels));
  for (int l = 0; l < opt_.levels; ++l) {
    const int64_t states = (count(l) + 1) * size_;
    levels_[size_t(l)].u = Tensor1<T>("mgrit.u", states);
    if (l > 0) {
      levels_[size_t(l)].g = Tensor1<T>("mgrit.g", states);
      levels_[size_t(l)].v = Tensor1<T>("mgrit.v", states);
      levels_[size_t(l)].has_rhs = true;
    }
  }
  tmp_ = Tensor1<T>("mgrit.tmp", size_);
  send_buf_.resize(size_t(size_));
  recv_buf_.resize(size_t(size_));
}

template <class T>
void Mgrit<T>::zero_guess() {
  auto u = levels_[0].u;
  const int64_t begin = rank_ == 0 ? size_ : 0;  // keep u_0
  Kokkos::parallel_for(
      "mgrit_zero", Range(begin, int64_t(u.extent(0))), KOKKOS_LAMBDA(const int64_t k) { u(k) = T(0); });
}

template <class T>
void Mgrit<T>::phi(int level, int64_t i, V1<const T> in, V1<T> out) {
  app_.step(level, i, in, out);
  if (stats_) ++stats_->steps[size_t(level)];
}

template <class T>
void Mgrit<T>::advance(int l, int64_t j) {
  Level& lv = levels_[size_t(l)];
  phi(l, lo(l) + j - 1, state(lv.u, j - 1), state(lv.u, j));  // the step from point lo + j - 1
  if (lv.has_rhs) app_.sum(T(1), state(lv.g, j), T(1), state(lv.u, j));
}

template <class T>
void Mgrit<T>::advance_interval(int l, int64_t j) {
  for (int64_t k = j + 1; k <= layout_.interval_end(l, rank_, j); ++k) advance(l, k);
}

template <class T>
Comm::Request Mgrit<T>::start_send(int l, Tensor1<T>& buf, int64_t j, int tag) {
  const int to = layout_.next(l, rank_);
  if (to < 0) return Comm::Request{};
  Kokkos::fence();
  app_.pack(state(buf, j), send_buf_.data());
  if (stats_) ++stats_->messages;
  return comm_.start_send(send_buf_.data(), size_, to, tag + l);
}

template <class T>
Comm::Request Mgrit<T>::start_receive(int l, int tag) {
  const int from = layout_.prev(l, rank_);
  if (from < 0 || count(l) == 0) return Comm::Request{};
  return comm_.start_recv(recv_buf_.data(), size_, from, tag + l);
}

template <class T>
void Mgrit<T>::finish_receive(Comm::Request& req, Tensor1<T>& buf) {
  if (!req.pending()) return;
  comm_.wait(req, "recv");
  app_.unpack(recv_buf_.data(), state(buf, 0));
}

template <class T>
void Mgrit<T>::exchange_ghost(int l) {
  if (!layout_.active(l, rank_)) return;
  Level& lv = levels_[size_t(l)];
  Comm::Request recv = start_receive(l, kGhostTag);
  Comm::Request send = start_send(l, lv.u, count(l), kGhostTag);
  finish_receive(recv, lv.u);
  if (send.pending()) comm_.wait(send, "send");
}

template <class T>
void Mgrit<T>::f_relax(int l) {
  if (!layout_.active(l, rank_)) return;
  Level& lv = levels_[size_t(l)];
  const int64_t c = opt_.cfactor, n = count(l), first = first_c(l);
  Comm::Request recv = start_receive(l, kGhostTag), send;
  // the last point goes first: a C-point as it is, an F-point once its interval is relaxed
  const int64_t last_c = layout_.last_c(l, rank_);
  const bool last_is_c = last_c == n;
  if (last_is_c) send = start_send(l, lv.u, n, kGhostTag);
  if (!last_is_c && first <= n) {
    advance_interval(l, last_c);
    send = start_send(l, lv.u, n, kGhostTag);
  }
  for (int64_t j = first; j <= n && j < last_c + (last_is_c ? 1 : 0); j += c) advance_interval(l, j);
  // the points before the first C-point continue the previous rank's interval
  finish_receive(recv, lv.u);
  if (first > 1) advance_interval(l, 0);
  if (!last_is_c && first > n) send = start_send(l, lv.u, n, kGhostTag);
  if (send.pending()) comm_.wait(send, "send");
}

template <class T>
void Mgrit<T>::c_relax(int l) {
  for (int64_t j = first_c(l); j <= count(l); j += opt_.cfactor) advance(l, j);
}

template <class T>
void Mgrit<T>::relax(int l, bool fcf) {
  f_relax(l);
  if (!fcf) return;
  c_relax(l);
  f_relax(l);
}

template <class T>
double Mgrit<T>::restrict_to(int l) {
  Level& fine = levels_[size_t(l)];
  Level& coarse = levels_[size_t(l) + 1];
  const int64_t c = opt_.cfactor, first = first_c(l), coarse_n = count(l + 1);
  // v = u at the C-points; the coarse ghost is the fine ghost where the block starts at a
  // C-point, else the previous coarse rank's last v
  for (int64_t k = 1; k <= coarse_n; ++k) app_.sum(T(1), state(fine.u, first + (k - 1) * c), T(0), state(coarse.v, k));
  const bool aligned = lo(l) % c == 0;
  if (aligned) app_.sum(T(1), state(fine.u, 0), T(0), state(coarse.v, 0));
  Comm::Request recv = aligned ? Comm::Request{} : start_receive(l + 1, kRestrictTag), send;
  const int to = layout_.next(l + 1, rank_);
  if (layout_.active(l + 1, rank_) && to >= 0 && layout_.lo(l, to) % c != 0)
    send = start_send(l + 1, coarse.v, coarse_n, kRestrictTag);
  finish_receive(recv, coarse.v);
  double norm2 = 0;
  for (int64_t k = 1; k <= coarse_n; ++k) {
    const int64_t j = first + (k - 1) * c;
    auto g = state(coarse.g, k);
    // r = g_l + Phi_l(u_{j-1}) - u_j
    phi(l, lo(l) + j - 1, state(fine.u, j - 1), g);
    if (fine.has_rhs) app_.sum(T(1), state(fine.g, j), T(1), g);
    app_.sum(T(-1), state(fine.u, j), T(1), g);
    norm2 += app_.norm_squared(g);
    // + v_k - Phi_{l+1}(v_{k-1})
    phi(l + 1, lo(l + 1) + k - 1, state(coarse.v, k - 1), V1<T>(tmp_));
    app_.sum(T(1), state(coarse.v, k), T(1), g);
    app_.sum(T(-1), tmp_, T(1), g);
  }
  if (send.pending()) comm_.wait(send, "send");
  Kokkos::deep_copy(coarse.u, coarse.v);  // the coarse level starts from the restriction
  return norm2;
}

template <class T>
void Mgrit<T>::correct_from(int l) {
  Level& fine = levels_[size_t(l)];
  Level& coarse = levels_[size_t(l) + 1];
  for (int64_t k = 1; k <= count(l + 1); ++k) {
    auto u = state(fine.u, first_c(l) + (k - 1) * opt_.cfactor);
    app_.sum(T(1), state(coarse.u, k), T(1), u);
    app_.sum(T(-1), state(coarse.v, k), T(1), u);
  }
}

template <class T>
void Mgrit<T>::sequential_solve(int l) {
  if (!layout_.active(l, rank_)) return;
  Level& lv = levels_[size_t(l)];
  Comm::Request recv = start_receive(l, kSolveTag);  // the previous block's last point
  finish_receive(recv, lv.u);
  for (int64_t j = 1; j <= count(l); ++j) advance(l, j);
  Comm::Request send = start_send(l, lv.u, count(l), kSolveTag);
  if (send.pending()) comm_.wait(send, "send");
}

template <class T>
void Mgrit<T>::cycle(int l) {
  if (l == opt_.levels - 1) {
    sequential_solve(l);
    return;
  }
  relax(l, l > 0 || opt_.fcf);
  restrict_to(l);
  cycle(l + 1);
  correct_from(l);
  f_relax(l);
}

template <class T>
MgritStats Mgrit<T>::solve() {
  MgritStats st;
  st.steps.assign(size_t(opt_.levels), 0);
  stats_ = &st;
  if (opt_.levels == 1) {
    sequential_solve(0);
    st.iterations = 1;
    st.converged = true;
  } else {
    for (int it = 0; it < opt_.max_iterations; ++it) {
      relax(0, opt_.fcf);
      const double norm = std::sqrt(comm_.allreduce_sum(restrict_to(0)));
      st.residuals.push_back(norm);
      if (norm <= opt_.tolerance) {
        st.converged = true;
        break;
      }
      cycle(1);
      correct_from(0);
      f_relax(0);
      ++st.iterations;
    }
  }
  exchange_ghost(0);  // every ghost holds its neighbour's final point
  stats_ = nullptr;
  return st;
}

template class Mgrit<float>;
template class Mgrit<double>;

}  // namespace strata
