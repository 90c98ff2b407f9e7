#pragma once
// Gradient clipping by global norm. The norm is over the whole model's gradient: every
// data-parallel replica holds the same (reduced) gradient, and within a tensor group each
// shard is counted once (by its replica 0) and the squares are summed over the group.
#include <algorithm>
#include <cmath>

#include "comm/comm.hpp"
#include "kernels/sum_squares.hpp"
#include "state/param_store.hpp"

namespace strata {

// Sum of squares of the gradient shards this rank owns (ParamInfo::replica == 0), over
// runs contiguous in the flat buffer and in the moments' order; with ZeRO-1 and 2, of
// its part of them only (the part whose gradients were summed here).
// experts: of the experts' parameters (Shard::expert), or of the others.
template <class T>
double owned_grad_sum_of_squares(const ParamStore<T>& store, bool experts = false) {
  double sum = 0;
  MomentSpan run;
  const auto flush = [&] {
    if (run.end > run.begin) sum += kernels::sum_of_squares<T>(V1<const T>(store.moment_grads(run)));
  };
  for (const auto& p : store.infos()) {
    if (p.replica != 0 || p.expert != experts) continue;
    for (const auto& part : store.zero().moment_parts(p)) {
      if (part.begin != run.end || part.at != run.at + (run.end - run.begin)) {
        flush();
        run = part;
      }
      run.end = part.end;
    }
  }
  flush();
  return sum;
}

// The global L2 norm of the gradients. tensor_group: the ranks that share the model's
// shards (nullptr without tensor parallelism); zero_group: with ZeRO-1, the data ranks
// whose blocks make up the gradient (nullptr without); expert_group: with expert
// parallelism, the ranks that hold the other experts of this tensor rank
// (Grid::expert_data_ranks(); nullptr without).
template <class T>
double global_grad_norm(const ParamStore<T>& store, Comm* tensor_group, Comm* zero_group = nullptr,
                        Comm* expert_group = nullptr) {
  double experts = owned_grad_sum_of_squares(store, true);
  // (every rank of an expert group is on one stage: they all hold experts, or none does)
  if (expert_group && store.numel() > store.expert_begin()) experts = expert_group->allreduce_sum(experts);
  double sq = owned_grad_sum_of_squares(store) + experts;
  if (zero_group) sq = zero_group->allreduce_sum(sq);
  if (tensor_group) sq = tensor_group->allreduce_sum(sq);
  return std::sqrt(sq);
}

// The factor clipping multiplies the gradients by: max_norm / norm where the norm exceeds
// max_norm (> 0), else 1 (a multiplication by 1 changes no value).
template <class T>
T grad_clip_scale(double norm, double max_norm) {
  return max_norm > 0 && norm > max_norm ? T(max_norm / (norm + 1e-6)) : T(1);
}

// global_grad_norm, and the gradients the update reads (all, or with ZeRO-1 and 2 this
// rank's part) scaled by grad_clip_scale in place. (The run's update folds the scale into
// AdamW instead, the same products without a pass of their own: OptimizerStep.)
template <class T>
double clip_grad_norm(ParamStore<T>& store, Comm* tensor_group, double max_norm, Comm* zero_group = nullptr,
                      Comm* expert_group = nullptr) {
  const double norm = global_grad_norm(store, tensor_group, zero_group, expert_group);
  const T scale = grad_clip_scale<T>(norm, max_norm);
  if (scale == T(1)) return norm;
  for (const auto& span : store.zero().moment_spans()) {
    const V1<T> grads = store.moment_grads(span);
    Kokkos::parallel_for(
        "grad_clip", Range(0, grads.extent(0)), KOKKOS_LAMBDA(const int64_t i) { grads(i) *= scale; });
  }
  return norm;
}

}  // namespace strata
