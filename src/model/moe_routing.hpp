#pragma once
// Two steps of a mixture layer's routing (model/moe_layer.hpp: MoeLayer::route) that depend
// on nothing but their tables: each token's top k experts, and the dispatch order.
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

template <class T>
struct MoeRouting;

template <class U>
using HostTable = typename Tensor2<U>::HostMirror;

// The top k of each token's router probabilities hp (N, E) into he (N, k), ties to the
// lower expert, and their gates into hg (renormalised over the k, for k > 1); returns the
// assignments per expert.
template <class T>
std::vector<int64_t> choose_top_k(const HostTable<T>& hp, HostTable<int32_t>& he, HostTable<T>& hg, int64_t k);

// The dispatch order, expert-major, then token, then slot, of the kept assignments of he
// (N, k) over E experts: each one's row in it (r.row, -1 where dropped) and each row's token
// (r.send_token); returns the rows per expert.
template <class T>
std::vector<int64_t> dispatch_order(const HostTable<int32_t>& he, const std::vector<char>& kept, int64_t E, int64_t k,
                                    MoeRouting<T>& r);

}  // namespace strata
