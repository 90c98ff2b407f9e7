#include "engine/layerpar/mgrit.hpp"

#include <cmath>
#include <stdexcept>
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

template <class T>
int64_t Mgrit<T>::pow_c(int l) const {
  int64_t p = 1;
  for (int i = 0; i < l; ++i) p *= opt_.cfactor;
  return p;
}

template <class T>
Mgrit<T>::Mgrit(TimeStepper<T>& app, Comm& comm, int64_t n_steps, MgritOptions options)
    : app_(app), comm_(comm), opt_(options), rank_(comm.rank()), ranks_(comm.size()), n_(n_steps),
      size_(app.state_size()) {
  if (opt_.levels < 1 || opt_.cfactor < 2 || opt_.max_iterations < 1)
    throw UserError("MGRIT: levels must be >= 1, cfactor >= 2 and iterations >= 1");
  const int64_t unit = ranks_ * pow_c(opt_.levels - 1);
  if (n_ % unit != 0)
    throw UserError("MGRIT: " + std::to_string(n_) + " steps do not split into " + std::to_string(ranks_) +
                    " ranks x cfactor^(levels-1) = " + std::to_string(unit) + " (each rank's block must be whole on the coarsest level)");
  block0_ = n_ / ranks_;
  levels_.resize(opt_.levels);
  for (int l = 0; l < opt_.levels; ++l) {
    const int64_t states = (block(l) + 1) * size_;
    levels_[l].u = Tensor1<T>("mgrit.u", states);
    if (l > 0) {
      levels_[l].g = Tensor1<T>("mgrit.g", states);
      levels_[l].v = Tensor1<T>("mgrit.v", states);
      levels_[l].has_rhs = true;
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
  Level& lv = levels_[l];
  const int64_t global = rank_ * block(l) + j - 1;  // the step from point global to global + 1
  phi(l, global, state(lv.u, j - 1), state(lv.u, j));
  if (lv.has_rhs) app_.sum(T(1), state(lv.g, j), T(1), state(lv.u, j));
}

template <class T>
void Mgrit<T>::exchange_ghost(int l) {
  if (ranks_ == 1) return;
  Level& lv = levels_[l];
  MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
  if (rank_ > 0) recv = comm_.start_recv(recv_buf_.data(), size_, rank_ - 1, l);
  if (rank_ + 1 < ranks_) {
    Kokkos::fence();
    app_.pack(state(lv.u, block(l)), send_buf_.data());
    send = comm_.start_send(send_buf_.data(), size_, rank_ + 1, l);
    if (stats_) ++stats_->messages;
  }
  if (rank_ > 0) {
    comm_.wait(recv, "recv");
    app_.unpack(recv_buf_.data(), state(lv.u, 0));
  }
  if (send != MPI_REQUEST_NULL) comm_.wait(send, "send");
}

template <class T>
void Mgrit<T>::f_relax(int l) {
  exchange_ghost(l);  // the first interval starts at the previous rank's last C-point
  const int64_t c = opt_.cfactor;
  for (int64_t base = 0; base < block(l); base += c)
    for (int64_t j = base + 1; j < base + c; ++j) advance(l, j);
}

template <class T>
void Mgrit<T>::c_relax(int l) {
  for (int64_t j = opt_.cfactor; j <= block(l); j += opt_.cfactor) advance(l, j);
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
  Level& fine = levels_[l];
  Level& coarse = levels_[l + 1];
  const int64_t c = opt_.cfactor;
  double norm2 = 0;
  // v = u at the C-points, the ghost included (current after the relaxation's exchange)
  for (int64_t k = 0; k <= block(l + 1); ++k) app_.sum(T(1), state(fine.u, k * c), T(0), state(coarse.v, k));
  for (int64_t k = 1; k <= block(l + 1); ++k) {
    const int64_t j = k * c;
    auto g = state(coarse.g, k);
    // r = g_l + Phi_l(u_{j-1}) - u_j
    phi(l, rank_ * block(l) + j - 1, state(fine.u, j - 1), g);
    if (fine.has_rhs) app_.sum(T(1), state(fine.g, j), T(1), g);
    app_.sum(T(-1), state(fine.u, j), T(1), g);
    norm2 += app_.norm_squared(g);
    // + v_k - Phi_{l+1}(v_{k-1})
    phi(l + 1, rank_ * block(l + 1) + k - 1, state(coarse.v, k - 1), V1<T>(tmp_));
    app_.sum(T(1), state(coarse.v, k), T(1), g);
    app_.sum(T(-1), tmp_, T(1), g);
  }
  Kokkos::deep_copy(coarse.u, coarse.v);  // the coarse level starts from the restriction
  return norm2;
}

template <class T>
void Mgrit<T>::correct_from(int l) {
  Level& fine = levels_[l];
  Level& coarse = levels_[l + 1];
  for (int64_t k = 1; k <= block(l + 1); ++k) {
    auto u = state(fine.u, k * opt_.cfactor);
    app_.sum(T(1), state(coarse.u, k), T(1), u);
    app_.sum(T(-1), state(coarse.v, k), T(1), u);
  }
}

template <class T>
void Mgrit<T>::sequential_solve(int l) {
  Level& lv = levels_[l];
  if (rank_ > 0) {  // wait for the previous block's last point
    MPI_Request r = comm_.start_recv(recv_buf_.data(), size_, rank_ - 1, 100 + l);
    comm_.wait(r, "recv");
    app_.unpack(recv_buf_.data(), state(lv.u, 0));
  }
  for (int64_t j = 1; j <= block(l); ++j) advance(l, j);
  if (rank_ + 1 < ranks_) {
    Kokkos::fence();
    app_.pack(state(lv.u, block(l)), send_buf_.data());
    MPI_Request s = comm_.start_send(send_buf_.data(), size_, rank_ + 1, 100 + l);
    if (stats_) ++stats_->messages;
    comm_.wait(s, "send");
  }
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
