#pragma once
// The vocabulary end of a GPT under any tensor split: token embedding, the LM head tied to
// it (logits = x wte^T) and the cross-entropy loss. wte [V, C] is split by vocabulary rows
// over the split's vocabulary group; how each split holds it and what its embedding and
// head send is in parallel/splits/. The loss takes its row maxima and sums over that group.
#include "kernels/products.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

// First vocabulary row of this rank's wte shard (v_local rows), and first vocabulary
// column of its logits block (v_local columns).
int64_t wte_vocab_begin(const TensorParallel& tp, int64_t v_local);
int64_t logits_vocab_begin(const TensorParallel& tp, int64_t v_local);

// tokens: all B*T tokens of the replica. out: this rank's rows (2D: batch block i; 1D
// with sequence parallelism: its block of B*T/t rows) of the hidden block it holds.
// scratch is resized as needed.
template <class T>
void tp_embedding_forward(const TensorParallel& tp, V2<T> out, V1<const int32_t> tokens, V2<const T> wte,
                          V2<const T> wpe, int64_t t_len, Tensor2<T>& scratch);
// dout: gradient of out. Accumulates dwte, dwpe.
template <class T>
void tp_embedding_backward(const TensorParallel& tp, V2<T> dwte, V2<T> dwpe, V2<const T> dout, V1<const int32_t> tokens,
                           int64_t t_len, Tensor2<T>& scratch);

// logits (rows, V local) = x wte^T.
template <class T>
void tp_head_logits(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> logits, V2<const T> x,
                    V2<const T> wte);
// Writes dx (complete); accumulates dwte. dx may alias x (x is read first).
template <class T>
void tp_head_backward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx, V2<T> dwte,
                      V2<const T> dlogits, V2<const T> x, V2<const T> wte);
// Its halves, in the order zero-bubble schedules run them: dx = dlogits wte (complete),
// then dwte += dlogits^T x (x must be intact: dx may not alias it). Under sequence
// parallelism dx is this rank's rows, reduce-scattered through rows (B*T, C).
template <class T>
void tp_head_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                            V2<const T> dlogits, V2<const T> wte, V2<T> rows = {});
template <class T>
void tp_head_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dwte,
                             V2<const T> dlogits, V2<const T> x);

// Softmax cross-entropy over the whole vocabulary of logits split by vocabulary columns.
// targets: this rank's rows. Writes losses and lse (rows); returns the sum of this rank's
// row losses.
template <class T>
double tp_cross_entropy_forward(const TensorParallel& tp, V1<T> losses, V1<T> lse, V2<const T> logits,
                                V1<const int32_t> targets);
// The logits of vocabulary columns >= vocab (a padded embedding's extra rows) := -inf, so
// the softmax, the loss and sampling leave them out and their gradients are zero.
template <class T>
void tp_mask_padded_logits(const TensorParallel& tp, V2<T> logits, int64_t vocab);
// In place: logits := scale * (softmax - onehot(target)) for this rank's columns.
template <class T>
void tp_cross_entropy_backward(const TensorParallel& tp, V2<T> logits, V1<const T> lse, V1<const int32_t> targets,
                               T scale);
// The same values written as bf16 into dlogits (the logits' shape, dense), the logits
// left as they are: for a dlogits that only bf16 products read, through the copy whose
// memory this is (kernels::RoundedCopy::fill). Host float only.
void tp_cross_entropy_backward_bf16(const TensorParallel& tp, kernels::bf16* dlogits, V2<const float> logits,
                                    V1<const float> lse, V1<const int32_t> targets, float scale);

}  // namespace strata
