#include "parallel/expert_exchange.hpp"

#include <stdexcept>

#include "kernels/moe.hpp"
#include "parallel/row_buffers.hpp"

namespace strata {
namespace {
std::vector<int64_t> scaled_counts(std::vector<int64_t> v, int64_t c) {
  for (auto& x : v) x *= c;
  return v;
}
}  // namespace

template <class T>
ExpertExchange<T>::ExpertExchange(const ExpertParallel& ep, int64_t experts, int64_t width)
    : ep_(ep), experts_(experts), local_experts_(experts / ep.size), c_(width) {
  if (experts % ep.size != 0) throw std::logic_error("ExpertExchange: the experts do not divide over the expert ranks");
}

template <class T>
void ExpertExchange<T>::count(const std::vector<int64_t>& per_expert, int64_t dispatched, ExpertCounts& r) const {
  const int e = ep_.size;
  const int64_t El = local_experts_;
  r.send_rows.assign(size_t(e), 0);
  for (int64_t i = 0; i < experts_; ++i) r.send_rows[size_t(i / El)] += per_expert[size_t(i)];
  if (!ep_.active()) {
    r.recv_rows = r.send_rows;
    r.expert_rows = per_expert;
    r.received = dispatched;
    return;
  }
  const std::vector<int64_t> from = ep_.experts->alltoall_counts(per_expert);  // [src][local expert]
  r.recv_rows.assign(size_t(e), 0);
  r.expert_rows.assign(size_t(El), 0);
  for (int src = 0; src < e; ++src)
    for (int64_t l = 0; l < El; ++l) {
      r.recv_rows[size_t(src)] += from[size_t(src * El + l)];
      r.expert_rows[size_t(l)] += from[size_t(src * El + l)];
    }
  r.received = 0;
  for (auto v : r.recv_rows) r.received += v;
  ensure_row_capacity(r.recv_place, "moe.recv_place", r.received);
  auto hplace = Kokkos::create_mirror_view(r.recv_place);
  // received: (src, local expert, row); the experts' order: (local expert, src, row)
  std::vector<int64_t> start(size_t(El), 0);
  for (int64_t l = 1; l < El; ++l) start[size_t(l)] = start[size_t(l - 1)] + r.expert_rows[size_t(l - 1)];
  int64_t q = 0;
  for (int src = 0; src < e; ++src)
    for (int64_t l = 0; l < El; ++l)
      for (int64_t c = 0; c < from[size_t(src * El + l)]; ++c) hplace(q++) = int32_t(start[size_t(l)]++);
  Kokkos::deep_copy(r.recv_place, hplace);
}

template <class T>
void ExpertExchange<T>::to_experts(V2<const T> rows, V2<T> expert_rows, const ExpertCounts& r) const {
  ensure_row_capacity(recv_, "moe.recv", r.received, c_);
  const V2<T> recv = leading_rows(recv_, r.received);
  ep_.experts->alltoallv<T>(V1<const T>(rows.data(), rows.size()), scaled_counts(r.send_rows, c_), values_of(recv),
                            scaled_counts(r.recv_rows, c_));
  kernels::scatter_rows<T>(expert_rows, recv, r.recv_place);
}

template <class T>
void ExpertExchange<T>::from_experts(V2<const T> expert_rows, V2<T> rows, const ExpertCounts& r) const {
  ensure_row_capacity(recv_, "moe.recv", r.received, c_);
  const V2<T> back = leading_rows(recv_, r.received);
  kernels::gather_rows<T>(back, expert_rows, r.recv_place);
  ep_.experts->alltoallv<T>(V1<const T>(back.data(), back.size()), scaled_counts(r.recv_rows, c_), values_of(rows),
                            scaled_counts(r.send_rows, c_));
}

template <class T>
void ExpertExchange<T>::traffic(Traffic& out, int64_t assignments, bool forward) const {
  if (!ep_.active()) return;
  const int e = ep_.size;
  if (forward) out.add("expert", "alltoall", Collective::AllToAll, e, experts_ * int64_t(sizeof(int64_t)));
  out.add("expert", "alltoallv", Collective::AllToAll, e, assignments * int64_t(sizeof(T)) * c_, 2);  // there and back
}

template class ExpertExchange<float>;
template class ExpertExchange<double>;

}  // namespace strata
