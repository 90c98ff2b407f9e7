#pragma once
// The interface every tensor split provides (parallel/tensor_parallel.hpp lists the
// splits). Besides its queries (traits, divisions, part_of, the vocabulary's place, the
// mixture's groups, placed_on), a split type declares
//   STRATA_TENSOR_SPLIT_OPERATIONS: the block's layers, each call's operands in one struct
//     below (layer norm, the "in" and "out" linears' forward and backward halves, the
//     embedding, the head), made for float, double and the bf16 operands by
//     STRATA_TENSOR_SPLIT_INSTANTIATE in its .cpp;
//   STRATA_TENSOR_SPLIT_TRAFFIC: what each of them sends (the planner's declarations).
// TensorParallel visits the split, so the compiler holds every split to the whole list.
// Y, X: an activation kept as bf16 (T = float); a split that cannot take one (it moves T)
// throws std::logic_error there.
#include "comm/traffic.hpp"
#include "core/tensor.hpp"
#include "kernels/bf16.hpp"
#include "kernels/products.hpp"
#include "parallel/tp3d_transfers.hpp"

namespace strata {

template <class T, class Y = T>
struct LayerNormCall {
  int64_t c_total;  // the full hidden width C
  V2<Y> y;
  V1<T> mean, rstd;
  V2<const T> x;
  V1<const T> w, b;
};
template <class T>
struct LayerNormBackwardCall {
  int64_t c_total;
  V2<T> dx;
  V1<T> dw, db;
  V2<const T> dy, x;
  V1<const T> w, mean, rstd;
  bool accumulate;
};
template <class T, class X = T>
struct LinearCall {
  kernels::ProductPrecision precision;
  V2<T> y;
  V2<const X> x;
  V2<const T> w;
  V1<const T> b;
  V2<T> rows;  // sequence parallelism's (B*T, width) buffer
  Linear3DTransfers<T>* transfers;
};
template <class T>
struct LinearInputCall {
  kernels::ProductPrecision precision;
  V2<T> dx;
  V2<const T> dy, w;
  V2<T> rows;
  Linear3DTransfers<T>* transfers;
};
template <class T, class X = T>
struct LinearWeightCall {
  kernels::ProductPrecision precision;
  V2<T> dw;
  V1<T> db;
  V2<const T> dy;
  V2<const X> x;
  Linear3DTransfers<T>* transfers;
};
template <class T>
struct EmbeddingCall {
  V2<T> out;
  V1<const int32_t> tokens;
  V2<const T> wte, wpe;
  int64_t t_len;
  Tensor2<T>& scratch;
};
template <class T>
struct EmbeddingBackwardCall {
  V2<T> dwte, dwpe;
  V2<const T> dout;
  V1<const int32_t> tokens;
  int64_t t_len;
  Tensor2<T>& scratch;
};
template <class T>
struct HeadLogitsCall {
  kernels::ProductPrecision precision;
  V2<T> logits;
  V2<const T> x, wte;
};
template <class T>
struct HeadInputCall {
  kernels::ProductPrecision precision;
  V2<T> dx;
  V2<const T> dlogits, wte;
  V2<T> rows;
};
template <class T>
struct HeadWeightCall {
  kernels::ProductPrecision precision;
  V2<T> dwte;
  V2<const T> dlogits, x;
};

// scratch (rows, cols), reallocated only when its shape changes
template <class T>
void ensure_scratch(Tensor2<T>& t, int64_t rows, int64_t cols) {
  ensure_extents(t, "tensor_split.scratch", rows, cols);
}

#define STRATA_TENSOR_SPLIT_OPERATIONS                              \
  template <class T, class Y>                                       \
  void layernorm_forward(const LayerNormCall<T, Y>&) const;         \
  template <class T>                                                \
  void layernorm_backward(const LayerNormBackwardCall<T>&) const;   \
  template <class T, class X>                                       \
  void linear_in_forward(const LinearCall<T, X>&) const;            \
  template <class T>                                                \
  void linear_in_backward_input(const LinearInputCall<T>&) const;   \
  template <class T, class X>                                       \
  void linear_out_forward(const LinearCall<T, X>&) const;           \
  template <class T>                                                \
  void linear_out_backward_input(const LinearInputCall<T>&) const;  \
  template <class T, class X>                                       \
  void linear_backward_weight(const LinearWeightCall<T, X>&) const; \
  template <class T>                                                \
  void embedding_forward(const EmbeddingCall<T>&) const;            \
  template <class T>                                                \
  void embedding_backward(const EmbeddingBackwardCall<T>&) const;   \
  template <class T>                                                \
  void head_logits(const HeadLogitsCall<T>&) const;                 \
  template <class T>                                                \
  void head_backward_input(const HeadInputCall<T>&) const;          \
  template <class T>                                                \
  void head_backward_weight(const HeadWeightCall<T>&) const;

// What each operation sends, call for call, as Comm counts it (comm/traffic.hpp), for this
// rank's local sizes: rows (sequence parallelism: the rows of the tensor-parallel region,
// B*T, of which each rank holds B*T/t elsewhere), the local input and output widths, the
// local vocabulary block v, e the element size in bytes; group names are the trainer's.
#define STRATA_TENSOR_SPLIT_TRAFFIC                                                                         \
  void loss_sum_traffic(Traffic& out) const;                                                                \
  void layernorm_forward_traffic(Traffic& out, int64_t rows, int64_t e) const;                              \
  void layernorm_backward_traffic(Traffic& out, int64_t rows, int64_t c_local, int64_t e) const;            \
  void linear_in_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const;   \
  void linear_in_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const;  \
  void linear_out_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const;  \
  void linear_out_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const; \
  void embedding_forward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const;                   \
  void embedding_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const;                  \
  void head_logits_traffic(Traffic& out, int64_t rows, int64_t c, int64_t v, int64_t e) const;              \
  void head_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t v, int64_t e) const;            \
  void cross_entropy_forward_traffic(Traffic& out, int64_t rows, int64_t e) const;                          \
  void gather_rows_traffic(Traffic& out, int64_t rows, int64_t width, int64_t e) const;

#define STRATA_TENSOR_SPLIT_INSTANTIATE_T(S, T)                                       \
  template void S::layernorm_forward<T, T>(const LayerNormCall<T, T>&) const;         \
  template void S::layernorm_backward<T>(const LayerNormBackwardCall<T>&) const;      \
  template void S::linear_in_forward<T, T>(const LinearCall<T, T>&) const;            \
  template void S::linear_in_backward_input<T>(const LinearInputCall<T>&) const;      \
  template void S::linear_out_forward<T, T>(const LinearCall<T, T>&) const;           \
  template void S::linear_out_backward_input<T>(const LinearInputCall<T>&) const;     \
  template void S::linear_backward_weight<T, T>(const LinearWeightCall<T, T>&) const; \
  template void S::embedding_forward<T>(const EmbeddingCall<T>&) const;               \
  template void S::embedding_backward<T>(const EmbeddingBackwardCall<T>&) const;      \
  template void S::head_logits<T>(const HeadLogitsCall<T>&) const;                    \
  template void S::head_backward_input<T>(const HeadInputCall<T>&) const;             \
  template void S::head_backward_weight<T>(const HeadWeightCall<T>&) const;

#define STRATA_TENSOR_SPLIT_INSTANTIATE(S)                                                                    \
  STRATA_TENSOR_SPLIT_INSTANTIATE_T(S, float)                                                                 \
  STRATA_TENSOR_SPLIT_INSTANTIATE_T(S, double)                                                                \
  template void S::layernorm_forward<float, kernels::bf16>(const LayerNormCall<float, kernels::bf16>&) const; \
  template void S::linear_in_forward<float, kernels::bf16>(const LinearCall<float, kernels::bf16>&) const;    \
  template void S::linear_out_forward<float, kernels::bf16>(const LinearCall<float, kernels::bf16>&) const;   \
  template void S::linear_backward_weight<float, kernels::bf16>(const LinearWeightCall<float, kernels::bf16>&) const;

}  // namespace strata
