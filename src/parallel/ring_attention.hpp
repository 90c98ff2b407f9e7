#pragma once
// Ring attention (Liu et al. 2023; the zigzag split of ring-flash-attention): the causal
// attention of sequences split over a context group (parallel/context_parallel.hpp), each
// rank holding its two chunks of every sequence as t local rows of its packed qkv.
//
// Forward. The rank's keys and values (K|V, (B*t, 2A)) travel the ring: at step s rank r
// holds those of rank r - s. Step 0 is the local causal attention (the local rows are in
// position order, so the mask of the two chunks is the local causal mask). At a later step
// the block came from rank j: if j < r, all of this rank's queries see j's first chunk and
// none of its second; if j > r, only this rank's second chunk sees anything, and all of
// j's keys. Those spans are unmasked, the same size on every rank (half the local
// queries by all the keys, or the other way round), and the blocks wholly masked (the
// other half) are skipped. Each step's output is merged into the running one by their
// logsumexp (kernels::AttentionSpan::resume). The send and receive of the next block are
// posted before the step's computation, so they overlap it.
//
// Backward. D = rowsum(dO * O) from the merged output; the blocks travel the ring again;
// each rank adds its queries' gradient dQ in place and computes the visiting block's dK,
// dV, which follow the block round the ring (each rank adds its part to the sum it
// receives and passes it on; the sum reaches the block's owner after the last step).
//
// Traffic per call and rank: forward X-1 sends of K|V; backward X-1 of K|V and X-1 of
// dK|dV; each B*t*2A elements ("context" group, kind "send").
#include "comm/traffic.hpp"
#include "core/deck_choices.hpp"
#include "core/tensor.hpp"
#include "kernels/attention.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/context_workspace.hpp"

namespace strata {

// out (B*t, A) and lse (B*H', t) of qkv (B*t, 3A) with h local heads, over the ring; the
// blocks in ws's slots 0-4.
// tiling: the fused kernel's blocks (default: kernels::attention_tiling's).
template <class T>
void ring_attention_forward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> out, V2<T> lse, V2<const T> qkv,
                            int64_t b, int64_t t, int64_t h, kernels::ProductPrecision precision,
                            kernels::AttentionTiling tiling = {0, 0, 0});
// dout (B*t, A) -> dqkv (B*t, 3A), from the forward's qkv, out and lse.
template <class T>
void ring_attention_backward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> dqkv, V2<const T> qkv,
                             V2<const T> out, V2<const T> lse, V2<const T> dout, int64_t b, int64_t t, int64_t h,
                             kernels::ProductPrecision precision, kernels::AttentionTiling tiling = {0, 0, 0});

// What one forward (and with backward, also its backward) sends, for `rows` = B*t local rows
// and a local heads' width a; e the element size.
void ring_attention_forward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e);
void ring_attention_backward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e);

}  // namespace strata
