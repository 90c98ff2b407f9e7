#include "model/moe_routing.hpp"

#include <algorithm>


namespace strata {

template <class T>
std::vector<int64_t> choose_top_k(const HostTable<T>& hp, HostTable<int32_t>& he, HostTable<T>& hg, int64_t k) {
  const int64_t n = hp.extent(0), E = hp.extent(1);
  std::vector<int64_t> assigned(size_t(E), 0);
  for (int64_t t = 0; t < n; ++t) {
    T sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t i = 0; i < E; ++i) {
        bool taken = false;
        for (int64_t q = 0; q < j; ++q) taken = taken || he(t, q) == i;
        if (!taken && (best < 0 || hp(t, i) > hp(t, best))) best = i;
      }
      he(t, j) = int32_t(best);
      sum += hp(t, best);
      ++assigned[size_t(best)];
    }
    for (int64_t j = 0; j < k; ++j) hg(t, j) = k == 1 ? hp(t, he(t, j)) : hp(t, he(t, j)) / sum;
  }
  return assigned;
}

std::vector<int64_t> dispatch_order(const HostTable<int32_t>& he, const std::vector<char>& kept, int64_t E, int64_t k,
                                    Tensor2<int32_t>& row_of, Tensor1<int32_t>& send_token, int64_t& dispatched) {
  const int64_t n = he.extent(0);
  std::vector<int64_t> per_expert(size_t(E), 0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j)
      if (kept[size_t(t * k + j)]) ++per_expert[size_t(he(t, j))];
  std::vector<int64_t> at(size_t(E), 0);
  for (int64_t i = 1; i < E; ++i) at[size_t(i)] = at[size_t(i - 1)] + per_expert[size_t(i - 1)];
  dispatched = at[size_t(E - 1)] + per_expert[size_t(E - 1)];
  if (int64_t(send_token.extent(0)) < dispatched || send_token.data() == nullptr)
    send_token = Tensor1<int32_t>("moe.send_token", size_t(std::max<int64_t>(dispatched, 1)));
  auto hs = Kokkos::create_mirror_view(send_token);
  auto hrow = Kokkos::create_mirror_view(row_of);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      if (!kept[size_t(t * k + j)]) {
        hrow(t, j) = -1;
        continue;
      }
      const int64_t row = at[size_t(he(t, j))]++;
      hrow(t, j) = int32_t(row);
      hs(row) = int32_t(t);
    }
  Kokkos::deep_copy(row_of, hrow);
  Kokkos::deep_copy(send_token, hs);
  return per_expert;
}

template std::vector<int64_t> choose_top_k<float>(const HostTable<float>&, HostTable<int32_t>&, HostTable<float>&,
                                                 int64_t);
template std::vector<int64_t> choose_top_k<double>(const HostTable<double>&, HostTable<int32_t>&, HostTable<double>&,
                                                  int64_t);

}  // namespace strata
