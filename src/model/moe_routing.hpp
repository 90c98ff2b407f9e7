#pragma once
// Two steps of a mixture layer's routing (model/moe_layer.hpp: MoeLayer::route) that depend
// on nothing but their tables: each token's top k experts, and the dispatch order.
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

template <class U>
using HostTable = typename Tensor2<U>::HostMirror;

// The top k of each token's router probabilities hp (N, E) into he (N, k), ties to the
// lower expert, and their gates into hg (renormalised over the k, for k > 1); returns the
// assignments per expert.
template <class T>
std::vector<int64_t> choose_top_k(const HostTable<T>& hp, HostTable<int32_t>& he, HostTable<T>& hg, int64_t k);

// The dispatch order, expert-major, then token, then slot, of the kept assignments of he
// (N, k) over E experts: each one's row in it (row, -1 where dropped), each row's token
// (send_token, grown to hold them) and their count (dispatched); returns the rows per expert.
std::vector<int64_t> dispatch_order(const HostTable<int32_t>& he, const std::vector<char>& kept, int64_t E, int64_t k,
                                    Tensor2<int32_t>& row, Tensor1<int32_t>& send_token, int64_t& dispatched);

}  // namespace strata
