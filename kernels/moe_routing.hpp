#pragma once
// The host-side bookkeeping of a mixture layer's routing (model/moe_layer.hpp:
// MoeLayer::route), on host copies of its tables and nothing else: each token's top k
// experts, which assignments an expert's capacity keeps, and the dispatch order.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace strata::kernels {

template <class U>
using HostTable = typename Tensor2<U>::HostMirror;

// The top k of each token's router probabilities hp (N, E) into he (N, k), ties to the
// lower expert, and their gates into hg (renormalised over the k, for k > 1); returns the
// assignments per expert.
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

// Capacity: counts (groups x E, the assignments of each ordered group to each expert,
// summed over every rank) becomes each group's first place in its expert's queue (exclusive
// prefix sums down the groups); then assignment (t, j) of he (N, k), in group key(t, j),
// takes the next place of its expert's, and is kept while that place is below cap.
template <class Key>
std::vector<char> kept_within_capacity(const HostTable<int32_t>& he, std::vector<int64_t> counts, int64_t E,
                                       int64_t cap, const Key& key) {
  const int64_t n = he.extent(0), k = he.extent(1);
  std::vector<int64_t> running(size_t(E), 0);
  for (size_t at = 0; at < counts.size(); at += size_t(E))
    for (int64_t i = 0; i < E; ++i) {
      const int64_t c = counts[at + size_t(i)];
      counts[at + size_t(i)] = running[size_t(i)];
      running[size_t(i)] += c;
    }
  std::vector<char> kept(size_t(n * k), 1);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < n; ++t) {  // local rows run in the key's order
      int64_t& place = counts[size_t(key(t, j) * E + he(t, j))];
      kept[size_t(t * k + j)] = place < cap;
      ++place;
    }
  return kept;
}

// The dispatch order, expert-major, then token, then slot, of the kept assignments of he
// (N, k) over E experts: each one's row in it (row, -1 where dropped), each row's token
// (send_token, grown to hold them) and their count (dispatched); returns the rows per expert.
inline std::vector<int64_t> dispatch_order(const HostTable<int32_t>& he, const std::vector<char>& kept, int64_t E,
                                           Tensor2<int32_t>& row_of, Tensor1<int32_t>& send_token,
                                           int64_t& dispatched) {
  const int64_t n = he.extent(0), k = he.extent(1);
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

}  // namespace strata::kernels
