#pragma once
// ZeRO stage 1 (Rajbhandari et al., 2020), parallel.zero = 1: the data-parallel ranks split
// the AdamW moments. The flat buffers are padded to `data` equal blocks
// (ParamStore::shard_moments); rank r keeps the moments of block r. After the backward the
// gradients are reduce-scattered (rank r gets the sum of block r), each rank clips and
// updates the parameters of its block (OptimizerStep: the norm's squares summed over the
// data group as well), and the parameters are all-gathered. A ring reduce-scatter plus a
// ring all-gather send exactly what a ring all-reduce sends (2(d-1)/d of the buffer per
// rank), so ZeRO-1 trades no bandwidth for its memory: the moments shrink from 2N to 2N/d
// values per rank.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "comm/comm.hpp"
#include "comm/int8_across.hpp"
#include "comm/powersgd_across.hpp"
#include "comm/traffic.hpp"
#include "state/param_store.hpp"

namespace strata {

// The experts' gradients summed over the ranks that hold the same experts.
template <class T>
void sum_expert_gradients(Comm& expert_data, ParamStore<T>& store) {
  const int64_t begin = store.expert_begin(), n = store.numel() - begin;
  if (n > 0) expert_data.allreduce_sum(V1<T>(store.grads().data() + begin, n));
}

// The data group's sum of the gradients: of all of them (an all-reduce), or with ZeRO-1 of
// the block whose moments this rank keeps (a reduce-scatter; the other blocks are left
// undefined).
// expert_data: the ranks that hold the same experts (Grid::expert_replicas()); the
// experts' gradients (ParamStore::expert_begin() on) are summed over it where it is
// smaller than the data group (expert parallelism, which the deck allows without ZeRO-1
// only).
template <class T>
V1<T> region(Tensor1<T>& buf, std::pair<int64_t, int64_t> r) {
  return V1<T>(buf.data() + r.first, r.second - r.first);
}

// The matrices of the store's gradients as a codec of the sum sees them (PowerSGD): each
// parameter's local part as its dimension 0 by the rest, an expert tensor [E, in, out] as
// E matrices; vectors are none. In the buffer's order (the experts' region follows the
// others whatever order the parameters were declared in).
template <class T>
std::vector<MatrixSpan> gradient_matrices(const ParamStore<T>& store) {
  std::vector<MatrixSpan> out;
  for (const auto& p : store.infos()) {
    if (p.numel == 0 || p.count.size() < 2) continue;
    if (p.expert && p.count.size() == 3) {
      const int64_t each = p.count[1] * p.count[2];
      for (int64_t e = 0; e < p.count[0]; ++e) out.push_back({p.offset + e * each, p.count[1], p.count[2]});
    } else {
      out.push_back({p.offset, p.count[0], p.numel / p.count[0]});
    }
  }
  std::sort(out.begin(), out.end(), [](const MatrixSpan& a, const MatrixSpan& b) { return a.offset < b.offset; });
  return out;
}

template <class T>
void sum_gradients(Comm& data, Comm& expert_data, ParamStore<T>& store) {
  if constexpr (std::is_same_v<T, float>)
    data.describe_matrices(store.grads().data(), store.numel(), [&] { return gradient_matrices(store); });
  if (store.zero().moments_sharded()) {  // each region over its group (the experts' are empty without a second region)
    data.reduce_scatter_blocks(region(store.grads(), store.zero().block_region(false)));
    if (const auto r = store.zero().block_region(true); r.second > r.first)
      expert_data.reduce_scatter_blocks(region(store.grads(), r));
  } else if (expert_data.size() == data.size()) {
    data.allreduce_sum(V1<T>(store.grads()));
  } else {
    data.allreduce_sum(V1<T>(store.grads().data(), store.expert_begin()));
    sum_expert_gradients(expert_data, store);
  }
}

// After a ZeRO-1 update of this rank's block: every block to every data rank (the
// experts' region, if the store has one, over the expert replicas); after a ZeRO-2 one,
// every unit's parts; after a ZeRO-3 one nothing (each pass gathers the units it reads).
template <class T>
void gather_updated_params(Comm& data, Comm& expert_data, ParamStore<T>& store) {
  if (store.zero().params_sharded()) return;
  auto& params = store.params();
  if (const auto* slots = store.zero().gradient_slots()) {  // ZeRO-2: unit by unit, each over its group
    for (const auto& u : slots->units())             // (a unit of one rank's group was updated whole here)
      if (u.shards > 1)
        (u.experts ? expert_data : data).allgather_blocks(V1<T>(params.data() + u.begin, u.end - u.begin));
    return;
  }
  data.allgather_blocks(region(params, store.zero().block_region(false)));
  if (const auto r = store.zero().block_region(true); r.second > r.first)
    expert_data.allgather_blocks(region(params, r));
}

// How the data group's vector sums run, as the planner counts them: flat (per_node 0),
// or node by node with per_node replicas a node (parallel.grad_sum = "nodes"), the part
// across the nodes as floats or, for float sums, coded (grad_compression: int8 codes, or
// PowerSGD's rank-r factors). place: this rank's among its node's replicas, whose block
// PowerSGD plans (-1: the place that sends the most).
struct NodeSum {
  int per_node = 0;
  GradCompression codec = GradCompression::None;
  int rank = 4;  // PowerSGD's
  int place = -1;
};

// PowerSGD's values across the nodes for one block: the factors (one all-reduce) and the
// Qs with the floats (another), of the place's block, or of the place that sends the most.
inline std::pair<int64_t, int64_t> low_rank_values(const std::vector<MatrixSpan>& matrices, int64_t block,
                                                   NodeSum how) {
  std::pair<int64_t, int64_t> most{0, 0};
  for (int k = how.place < 0 ? 0 : how.place; k < (how.place < 0 ? how.per_node : how.place + 1); ++k) {
    const LowRankPlan plan = plan_low_rank(matrices, k * block, (k + 1) * block, how.rank);
    if (plan.p_values + plan.q_values + plan.rest_values > most.first + most.second)
      most = {plan.p_values, plan.q_values + plan.rest_values};
  }
  return most;
}

// One vector sum of `values` values over the data group of data_ranks as Comm counts it:
// one all-reduce, or node by node the blocks' reduce-scatter over "data_node", the
// all-reduce of this rank's block over "data_across" (int8: the all-gather of its codes
// and scales, comm/int8_across.hpp; PowerSGD: two all-reduces of its factors and floats
// for the matrices of the buffer, comm/powersgd_across.hpp) and the all-gather, and the
// last values mod per_node summed over the two as they are (comm/comm_by_node.cpp).
inline void replica_sum_traffic(Traffic& out, int data_ranks, NodeSum how, int64_t values, int64_t value_bytes,
                                const std::vector<MatrixSpan>& matrices = {}) {
  const int per_node = how.per_node;
  if (per_node <= 0) return out.add("data", "allreduce", Collective::AllReduce, data_ranks, values * value_bytes);
  const int nodes = data_ranks / per_node;
  const int64_t block = values / per_node, tail = values - block * per_node;
  const bool coded = how.codec != GradCompression::None && value_bytes == int64_t(sizeof(float));
  if (block > 0) {
    out.add("data_node", "reduce_scatter", Collective::ReduceScatter, per_node, block * value_bytes);
    if (coded && how.codec == GradCompression::Int8) {
      out.add("data_across", "allgather", Collective::AllGather, nodes, Int8Across::payload_bytes(block));
    } else if (coded) {
      const auto [factors, floats] = low_rank_values(matrices, block, how);
      for (const int64_t v : {factors, floats})
        if (v > 0) out.add("data_across", "allreduce", Collective::AllReduce, nodes, v * value_bytes);
    } else {
      out.add("data_across", "allreduce", Collective::AllReduce, nodes, block * value_bytes);
    }
    out.add("data_node", "allgather", Collective::AllGather, per_node, block * value_bytes);
  }
  if (tail > 0) {
    out.add("data_node", "allreduce", Collective::AllReduce, per_node, tail * value_bytes);
    out.add("data_across", "allreduce", Collective::AllReduce, nodes, tail * value_bytes);
  }
}

// What sum_gradients and, with ZeRO-1, the update's norm and gather send on one rank of a
// data group of data_ranks (comm/traffic.hpp), for the store's values; with expert
// parallelism the experts' part over the expert replicas ("expert_data") and, without
// ZeRO-1, the norm's expert squares over the data group's part of the expert split
// ("expert", or "expert_peers" where a 1D or 3D split of tensor_split ranks is part of it too).
// bucketed: the other parameters' sum is the data-parallel driver's buckets (counted by
// the caller); the experts' follows. node_sum: the data group's sums node by node
// (replica_sum_traffic).
template <class T>
void gradient_sum_traffic(Traffic& out, const ParamStore<T>& store, int data_ranks, bool zero, bool bucketed = false,
                          int tensor_split = 1, NodeSum node_sum = {}) {
  const int64_t vb = sizeof(T), dense = store.expert_begin(), experts = store.numel() - dense;
  const int e = std::max(1, store.table().expert_split() / tensor_split),
            expert_ranks = data_ranks / e;  // e: parallel.expert
  const bool split = e > 1 && experts > 0;
  if (zero && data_ranks > 1) {
    const int64_t block = zero_block(split ? dense : dense + experts, data_ranks) * vb;
    out.add("data", "reduce_scatter", Collective::ReduceScatter, data_ranks, block);
    out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, sizeof(double));  // the norm's squares
    out.add("data", "allgather", Collective::AllGather, data_ranks, block);
    if (split) {
      const int64_t expert_block = zero_block(experts, expert_ranks) * vb;
      out.add("expert_data", "reduce_scatter", Collective::ReduceScatter, expert_ranks, expert_block);
      out.add("expert_data", "allgather", Collective::AllGather, expert_ranks, expert_block);
    }
    return;
  }
  if (bucketed) {
    if (experts > 0)
      out.add(split ? "expert_data" : "data", "allreduce", Collective::AllReduce, split ? expert_ranks : data_ranks,
              experts * vb);
  } else if (split) {
    replica_sum_traffic(out, data_ranks, node_sum, dense, vb, gradient_matrices(store));
    out.add("expert_data", "allreduce", Collective::AllReduce, expert_ranks, experts * vb);
  } else {
    replica_sum_traffic(out, data_ranks, node_sum, dense + experts, vb, gradient_matrices(store));
  }
  if (split)  // the norm's expert squares
    out.add(tensor_split > 1 ? "expert_peers" : "expert", "allreduce_scalar", Collective::AllReduce, e, sizeof(double));
}

}  // namespace strata
