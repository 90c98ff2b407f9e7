#pragma once
// A mixture-of-experts MLP (model.moe_experts = E), in place of a block's dense MLP:
//   probs = softmax(x Wr)                      the router, fp32, row by row
//   e_1..e_k = the k largest probs of a token  ties to the lower expert
//   gate_j = p_{e_j} / sum_j' p_{e_j'}  (k = 2: renormalised over the chosen, as Mixtral)
//   gate_1 = p_{e_1}                    (k = 1: the probability itself, as Switch, so the
//                                        router also learns from the language loss)
//   out = sum_j gate_j expert_{e_j}(x)         expert: fc, GELU, proj (a dense MLP of
//                                              hidden width model.moe_ffn_hidden)
// With a capacity (model.moe_capacity_factor f > 0) an expert takes at most
// ceil(f N k / E) of a global micro-batch's N k assignments, first choices before second
// ones, then by (sequence, position) in the global micro-batch; the others are dropped
// (no term: a token whose every assignment is dropped passes through the residual only).
// Every layout drops the same assignments: the counts are summed over the ranks that hold
// the micro-batch's tokens (ExpertParallel::tokens).
// The load-balancing loss (Switch Transformer) alpha E sum_i f_i P_i, f_i the share of the
// global micro-batch's assignments (before dropping) routed to expert i, P_i the mean of
// its router probability over the micro-batch's tokens, and the router z-loss
// beta mean(lse^2) are added to the training loss, averaged over the micro-batches (each
// is linear in the tokens' probabilities once f is known, so every rank adds its tokens'
// terms and the engines' sums make the global value). They enter the gradients only; the
// reported loss is the language model's.
// Experts are split over the expert group (parallel.expert): a rank holds experts
// [rank E/e, (rank+1) E/e); the tokens' rows go to their experts' ranks and back by
// all-to-alls of counted sizes (counts first). Under a 1D tensor split of t ranks the
// tensor ranks are expert ranks too: tensor rank r routes rows [r N/t, (r+1) N/t) of the
// replicated input (under sequence parallelism, the rows it holds), the outputs and input
// gradients are all-gathered over the tensor group, and the router's gradient (its
// weights replicated there) is summed over it. Under a 3D split of X x Y x depth ranks
// the tensor ranks are expert ranks too: depth rank z holds its own sequences (TokenPlace
// counts it as a split of the data group), the input's (N/depth, C/X) column blocks are
// all-gathered over X into whole rows, each of the X x Y ranks of its plane routes part
// y X + x of them, the outputs (and input gradients) are all-gathered over X, then Y, and
// each rank keeps its column block; the routing statistics and the router's gradient are
// summed over the whole tensor group. Weights: router [C, E], fc [E, C, F],
// fc bias [E, F], proj [E, F, C], proj bias [E, C]; the experts' are global tensors with
// the expert as the leading dimension (Shard::expert).
#include <string>
#include <vector>

#include "comm/traffic.hpp"
#include "core/deck.hpp"
#include "model/block_context.hpp"
#include "parallel/expert_exchange.hpp"
#include "parallel/expert_parallel.hpp"
#include "parallel/expert_row_parts.hpp"
#include "parallel/tensor_parallel.hpp"
#include "report/expert_load.hpp"
#include "state/param_store.hpp"

namespace strata {

// Where a rank's rows lie in the global micro-batch (the capacity's order): its data
// replica's sequences, and its context rank's chunks of each.
struct TokenPlace {
  int data_rank = 0, data_size = 1;
  int context_rank = 0, context_size = 1;
};

// One forward's routing, kept for its backward (host bookkeeping and device indices).
template <class T>
struct MoeRouting {
  Tensor2<T> probs;                           // (N, E) router probabilities
  Tensor1<T> lse;                             // (N) router logsumexp
  Tensor2<int32_t> expert;                    // (N, k) chosen experts
  Tensor2<T> gate;                            // (N, k) their weights
  Tensor2<int32_t> row;                       // (N, k) the assignment's row in the dispatch order, -1: dropped
  Tensor1<int32_t> send_token;                // (S) the token of each dispatched row (expert-major, this rank's)
  ExpertCounts exchange;                      // the rows to and from each expert rank (R received)
  std::vector<double> aux;                    // (E) dL/dp for each expert, per unit of the loss scale
  int64_t dispatched = 0;                     // S
};

// Activations one forward keeps: the routing, the experts' input rows (local experts'
// order), their hidden values before and after GELU, and the outputs back home.
template <class T>
struct MoeCache {
  MoeRouting<T> routing;
  Tensor2<T> xe, h, hg;  // (R, C), (R, F), (R, F)
  Tensor2<T> yk;         // (S, C) the experts' outputs, in dispatch order
  Tensor2<T> x_rows;     // 3D with X > 1: this rank's rows of the whole input (N / parts, C)
  int64_t bytes() const;
};

template <class T>
class MoeLayer {
 public:
  // prefix: the block's parameter names ("blocks.L."). held: this rank runs the block.
  // tp: the tensor split (1D, 3D or none), which must outlive the layer. x, out, dout and
  // dx below are the block's activations: (N, C), under 3D (N / depth, C / X).
  MoeLayer(ParamStore<T>& store, const TensorParallel& tp, const ExpertParallel& ep, const TokenPlace& place,
           const ModelConfig& cfg, kernels::ProductPrecision precision, const std::string& prefix, double std,
           double proj_std, bool held);
  // x (N, C) -> out (N, C), written. Returns this rank's tokens' share of the auxiliary
  // losses, per unit of the loss scale (sum over its tokens of alpha E sum_i f_i p_ti +
  // beta lse_t^2): the loss they add is that times dloss_scale, summed over the ranks.
  // count_load: add the routing to load() (not when full recomputation runs it again).
  double forward(const BlockContext& ctx, V2<const T> x, V2<T> out, MoeCache<T>& cache, bool count_load = true) const;
  // The routing and experts of this rank's rows (forward's, on x's rows of this tensor
  // rank): out (the rows' outputs), the auxiliary losses.
  double forward_rows(const BlockContext& ctx, V2<const T> x, V2<T> out, MoeCache<T>& cache, bool count_load) const;
  // dout (N, C) -> dx (N, C), written; accumulates the router's and the local experts'
  // gradients. dloss_scale: dL/d(one token's loss), as the language loss's.
  void backward(V2<const T> x, V2<const T> dout, V2<T> dx, T dloss_scale, MoeCache<T>& cache) const;
  // What one forward (forward = true) or one backward sends (comm/traffic.hpp), at a
  // balanced routing (every expert rank gets 1/e of the assignments): the forward the
  // routing statistics, the counts and the rows there and back; the backward the rows'
  // gradients there and back.
  void traffic(const BlockContext& ctx, Traffic& out, bool forward) const;
  // A forward's and backward's kept bytes at a balanced routing, or with a capacity factor
  // f > 1 at f times it (the planner's figure; a dropless routing can exceed it).
  int64_t cache_bytes_for(const BlockContext& ctx) const;
  const ExpertLoad& load() const { return load_; }
  // Assignments of this rank's rows that the capacity dropped, counted from the routing
  // itself over the layer's life (never reset): summed over the ranks, the tokens every
  // layout must drop alike (load().dropped is the count the formula gives).
  int64_t dropped_here() const { return dropped_here_; }
  void reset_load() const {
    load_ = ExpertLoad{};
    load_.assigned.assign(size_t(experts_), 0);
  }

 private:
  // The routing of x's rows into r; returns their auxiliary losses (forward's value).
  double route(const BlockContext& ctx, V2<const T> x, MoeRouting<T>& r, bool count_load) const;
  // route's steps (and kernels/moe_routing.hpp's), on host copies of the routing's (N, k) tables
  template <class U>
  using HostRows = typename Tensor2<U>::HostMirror;
  // counts summed over the ranks that route the replica's rows (tensor ranks, expert ranks)
  std::vector<int64_t> summed_over_routing_ranks(std::vector<int64_t> counts) const;
  std::vector<char> kept_within_capacity(const BlockContext& ctx, const HostRows<int32_t>& expert,
                                         const std::vector<int64_t>& global, int64_t tokens,
                                         int64_t& dropped_global) const;
  void backward_rows(V2<const T> x, V2<const T> dout, V2<T> dx, T dloss_scale, MoeCache<T>& cache) const;
  // Local expert l's two linears, as slices of the store's parameters or gradients.
  struct ExpertWeights {
    V2<T> fc_w, proj_w;
    V1<T> fc_b, proj_b;
  };
  ExpertWeights expert_params(int64_t l) const { return expert_slices(l, false); }
  ExpertWeights expert_grads(int64_t l) const { return expert_slices(l, true); }
  ExpertWeights expert_slices(int64_t l, bool grads) const;

  ParamStore<T>& store_;
  const TensorParallel& tp_;
  ExpertRowParts<T> shared_;  // the tensor ranks' parts of the rows (parallel/expert_row_parts.hpp)
  Comm* peers_ = nullptr;     // the tensor ranks routing the replica's other rows (null: none)
  ExpertParallel ep_;
  TokenPlace place_;
  kernels::ProductPrecision precision_;
  int64_t c_, f_, experts_, local_experts_, top_k_;
  double capacity_factor_, aux_alpha_, z_beta_;
  int router_, fc_w_, fc_b_, proj_w_, proj_b_;
  mutable ExpertLoad load_;
  mutable int64_t dropped_here_ = 0;
  ExpertExchange<T> exchange_;             // the rows to their experts' ranks and back
  mutable Tensor2<T> send_, work_;         // exchange buffers, kept between calls
  mutable Tensor2<T> slice_;               // a tensor rank's rows' outputs or input gradients
  mutable Tensor2<T> router_grad_;         // (C, E): one micro-batch's, summed over the tensor group
};

}  // namespace strata
