#include "parallel/tp3d_transfers.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/timers.hpp"
#include "kernels/gemm_pieces.hpp"
#include "kernels/residual.hpp"

namespace strata {

template <class T>
void Linear3DTransfers<T>::attach(V1<T> gathered0, V1<T> gathered1, V1<T> grad0, V1<T> grad1) {
  finish();
  V1<T> g[2] = {gathered0, gathered1}, r[2] = {grad0, grad1};
  for (int i = 0; i < 2; ++i) {
    gathers_[i] = Gather();
    gathers_[i].values = g[i];
    gathers_[i].host = Kokkos::create_mirror_view(g[i]);
    reduces_[i] = Reduce();
    reduces_[i].values = r[i];
    reduces_[i].host = Kokkos::create_mirror_view(r[i]);
  }
}

template <class T>
typename Linear3DTransfers<T>::Gather& Linear3DTransfers<T>::free_gather() {
  Gather& a = gathers_[0];
  Gather& b = gathers_[1];
  const bool a_free = a.used, b_free = b.used;
  if (a_free && b_free) return a.stamp <= b.stamp ? a : b;
  if (a_free || b_free) return a_free ? a : b;
  Gather& older = a.stamp <= b.stamp ? a : b;  // two prefetches nobody used: the older one is dropped
  complete(older);
  older.used = true;
  return older;
}

template <class T>
void Linear3DTransfers<T>::post_gather(Gather& s, const Linear3DGroups& g, V1<const T> shard) {
  const int64_t n = shard.extent(0), p = g.depth.size();
  if (int64_t(s.values.extent(0)) < n * p)
    throw std::logic_error("Linear3DTransfers: a gathered block of " + std::to_string(n * p) + " values in a slot of " +
                           std::to_string(s.values.extent(0)));
  Kokkos::fence();  // the shard's writers (the optimizer) are done
  Kokkos::deep_copy(Kokkos::subview(s.host, std::make_pair(g.depth.rank() * n, (g.depth.rank() + 1) * n)), shard);
  s.shard = shard.data();
  s.depth = &g.depth;
  s.used = false;
  s.stamp = ++clock_;
  s.request = g.depth.start_allgather_in_place(s.host.data(), n);
}

template <class T>
void Linear3DTransfers<T>::complete(Gather& s) {
  if (!s.depth) return;
  s.depth->wait(s.request, "allgather");
  Kokkos::deep_copy(s.values, s.host);  // nothing to copy where the mirror is the slot
  s.depth = nullptr;
}

template <class T>
void Linear3DTransfers<T>::prefetch(const Linear3DGroups& g, V1<const T> shard) {
  if (!g.overlap || g.depth.size() == 1) return;
  post_gather(free_gather(), g, shard);
}

template <class T>
V2<const T> Linear3DTransfers<T>::block(const Linear3DGroups& g, V1<const T> shard, int64_t rows, int64_t cols) {
  if (int64_t(shard.extent(0)) * g.depth.size() != rows * cols)
    throw std::logic_error("Linear3DTransfers: a shard of " + std::to_string(shard.extent(0)) +
                           " values is no part of a " + std::to_string(rows) + " x " + std::to_string(cols) + " block");
  if (g.depth.size() == 1) return V2<const T>(shard.data(), rows, cols);
  Gather* s = nullptr;
  for (auto& c : gathers_)
    if (!c.used && c.shard == shard.data() && c.depth == &g.depth) s = &c;
  if (!s) {
    s = &free_gather();
    post_gather(*s, g, shard);
  }
  complete(*s);
  s->used = true;
  s->stamp = ++clock_;
  return V2<const T>(s->values.data(), rows, cols);
}

template <class T>
void Linear3DTransfers<T>::pieces(kernels::ProductPrecision precision, const char* ta, const char* tb, V2<const T> a,
                                  V2<const T> b, V2<T> c) {
  bool in_flight = false;
  for (auto& s : gathers_) in_flight = in_flight || s.request.pending();
  for (auto& s : reduces_) in_flight = in_flight || s.request.pending();
  in_flight = in_flight || sum_.request.pending();
  if (!in_flight) {
    kernels::product<T>(precision, ta, tb, a, b, T(0), c);
    return;
  }
  progress();
#if !defined(KOKKOS_ENABLE_CUDA)
  // fp32 and fp64 products in up to four pieces along K, the transfers progressed between
  // them (the same bits as uncut: gemm_pieces.hpp); bf16 products add their K in one call.
  const int64_t k = ta[0] == 'T' ? a.extent(0) : a.extent(1);
  if (precision.type != Precision::BF16 && k > kernels::detail::kSliceK) {
    kernels::gemm_in_k_pieces<T>(ta[0], tb[0], a, b, c, 4, [this] { progress(); });
    return;
  }
#endif
  kernels::product<T>(precision, ta, tb, a, b, T(0), c);
  progress();
}

template <class T>
void Linear3DTransfers<T>::product(const Linear3DGroups& g, const char* label, kernels::ProductPrecision precision,
                                   const char* ta, const char* tb, V2<const T> a, V2<const T> b, V2<T> c) {
  TraceRecorder* trace = g.depth.trace();
  const double t0 = trace ? Timers::now() : 0.0;
  pieces(precision, ta, tb, a, b, c);
  if (trace) {
    Kokkos::fence();
    trace->add(label, "product", t0, Timers::now());
  }
}

template <class T>
V2<T> Linear3DTransfers<T>::gradient_slot(int64_t rows, int64_t cols) {
  Reduce& s = reduces_[next_reduce_];
  complete(s);
  if (int64_t(s.values.extent(0)) < rows * cols)
    throw std::logic_error("Linear3DTransfers: a weight gradient block of " + std::to_string(rows * cols) +
                           " values in a slot of " + std::to_string(s.values.extent(0)));
  return V2<T>(s.values.data(), rows, cols);
}

template <class T>
void Linear3DTransfers<T>::reduce_scatter(const Linear3DGroups& g, V1<T> dw_shard) {
  Reduce& s = reduces_[next_reduce_];
  const int64_t n = dw_shard.extent(0);
  if (g.depth.size() == 1) {
    kernels::residual_accumulate<T>(dw_shard, V1<const T>(s.values.data(), n));
    return;
  }
  next_reduce_ = 1 - next_reduce_;
  Kokkos::fence();  // the product that filled the slot is done
  Kokkos::deep_copy(s.host, s.values);
  s.target = dw_shard;
  s.depth = &g.depth;
  s.request = g.depth.start_reduce_scatter_in_place(s.host.data(), n);
  if (!g.overlap) complete(s);
}

template <class T>
void Linear3DTransfers<T>::complete(Reduce& s) {
  if (!s.depth) return;
  s.depth->wait(s.request, "reduce_scatter");
  const int64_t n = s.target.extent(0);
  const auto part = std::make_pair(int64_t(0), n);
  Kokkos::deep_copy(Kokkos::subview(s.values, part), Kokkos::subview(s.host, part));
  kernels::residual_accumulate<T>(s.target, V1<const T>(s.values.data(), n));
  s.depth = nullptr;
  s.target = V1<T>();
}

template <class T>
bool Linear3DTransfers<T>::input_sums_later(const Linear3DGroups& g) const {
  return input_sums_later_ && g.overlap;
}

template <class T>
void Linear3DTransfers<T>::sum_later(Comm& group, V2<T> dx) {
  input_sum();
  Kokkos::fence();  // the product that wrote dx is done
  sum_.values = dx;
  sum_.host = Kokkos::create_mirror_view(dx);  // dx itself where the host can read it
  Kokkos::deep_copy(sum_.host, dx);
  sum_.group = &group;
  sum_.request = group.start_allreduce_in_place(sum_.host.data(), int64_t(dx.size()));
}

template <class T>
void Linear3DTransfers<T>::input_sum() {
  if (!sum_.group) return;
  sum_.group->wait(sum_.request, "allreduce");
  Kokkos::deep_copy(sum_.values, sum_.host);
  sum_.group = nullptr;
  sum_.values = V2<T>();
  sum_.host = typename V2<T>::HostMirror();
}

template <class T>
void Linear3DTransfers<T>::finish() {
  input_sum();
  for (auto& s : gathers_) {
    complete(s);
    s.used = true;
  }
  for (auto& s : reduces_) complete(s);
}

template <class T>
void Linear3DTransfers<T>::progress() {
  if (sum_.group) sum_.group->progress(&sum_.request, 1);
  for (auto& s : gathers_)
    if (s.depth) s.depth->progress(&s.request, 1);
  for (auto& s : reduces_)
    if (s.depth) s.depth->progress(&s.request, 1);
}

template class Linear3DTransfers<float>;
template class Linear3DTransfers<double>;

}  // namespace strata
