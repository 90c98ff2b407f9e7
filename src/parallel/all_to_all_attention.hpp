#pragma once
// Context parallelism's other attention (parallel.context_mode = "all-to-all"; Jacobs et
// al. 2023, DeepSpeed-Ulysses): an all-to-all over the context group turns this rank's
// local rows of every local head into whole sequences of 1/X of the heads, the fused
// causal attention runs on those (its own mask, no merging), and a second all-to-all
// brings the output back to the local rows. The backward does the same with the output
// gradient, after redoing the forward's two all-to-alls of Q, K, V and the output (which
// it does not keep: the same memory as the ring); its gradient goes back by a fourth.
// The local rows are the zigzag chunks (context_parallel.hpp), so the embeddings and the
// loss are those of the ring; the whole sequences are put in position order between.
//
// Traffic per call and rank ("context" group, kind "alltoall", payload the send buffer):
// forward B t 3A and B t A values; backward 2 x B t 3A and 2 x B t A.
#include "comm/traffic.hpp"
#include "core/deck_choices.hpp"
#include "core/tensor.hpp"
#include "kernels/products.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/context_workspace.hpp"

namespace strata {

// out (B*t, A) and lse (B*H', t) of qkv (B*t, 3A) with h local heads (h divisible by X);
// lse's buffer holds the whole sequences' logsumexps of this rank's heads, (B*H'/X, T).
// The exchange buffers and the gathered heads are ws's slots 0-5.
template <class T>
void all_to_all_attention_forward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> out, V2<T> lse,
                                  V2<const T> qkv, int64_t b, int64_t t, int64_t h,
                                  kernels::ProductPrecision precision);
template <class T>
void all_to_all_attention_backward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> dqkv, V2<const T> qkv,
                                   V2<const T> out, V2<const T> lse, V2<const T> dout, int64_t b, int64_t t, int64_t h,
                                   kernels::ProductPrecision precision);

void all_to_all_attention_forward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e);
void all_to_all_attention_backward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e);

}  // namespace strata
