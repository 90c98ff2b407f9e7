#pragma once
// The layers of a transformer block as seen by the block, whatever the tensor split
// (parallel/tensor_parallel.hpp): each function is the split's operation (the serial
// kernel, Megatron's 1D operator, Optimus' SUMMA, AxoNN's 3D linear: parallel/splits/,
// where each split says what it sends). All views are this rank's local parts; c_total is
// the full hidden size C.
//
// A block's linears come in pairs: an "in" linear (qkv, fc) whose input is the block's
// activation, then an "out" linear (proj, fc_proj) whose input is the in linear's split
// output. `rows` is sequence parallelism's (B*T, C) buffer; `transfers` the 3D split's
// weight-block gathers (parallel/tp3d_transfers.hpp: the caller prefetches the next
// linear's block there, and finishes the weight gradients' reduce-scatters).
#include "kernels/bf16.hpp"
#include "kernels/products.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

// x, y (rows, C local). Serial and 1D: the serial kernel on replicated rows.
template <class T>
void tp_layernorm_forward(const TensorParallel& tp, int64_t c_total, V2<T> y, V1<T> mean, V1<T> rstd, V2<const T> x,
                          V1<const T> w, V1<const T> b);
// Writes dL/dx to dx, or adds it if accumulate (a residual stream's gradient);
// accumulates dw, db.
template <class T>
void tp_layernorm_backward(const TensorParallel& tp, int64_t c_total, V2<T> dx, V1<T> dw, V1<T> db, V2<const T> dy,
                           V2<const T> x, V1<const T> w, V1<const T> mean, V1<const T> rstd, bool accumulate);

// Sequence parallelism: every rank's rows of local (B*T/t, C) into full (B*T, C), in rank order.
template <class T>
void tp_gather_rows(const TensorParallel& tp, V2<T> full, V2<const T> local);

// y = x w + b for a linear whose input is the block's (replicated in 1D) activation
// (sequence parallelism: x holds this rank's rows, gathered through `rows`).
template <class T>
void tp_linear_in_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                          V2<const T> w, V1<const T> b, V2<T> rows = {}, Linear3DTransfers<T>* transfers = nullptr);
// The backward comes in two halves, which zero-bubble pipeline schedules run apart:
// *_backward_input writes dx (complete: summed over the group in 1D);
// tp_linear_backward_weight accumulates dw, db (either kind of linear).
template <class T>
void tp_linear_in_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                                 V2<const T> dy, V2<const T> w, V2<T> rows = {},
                                 Linear3DTransfers<T>* transfers = nullptr);
// y = x w + b for a linear whose input is split over the group in 1D (its output is
// all-reduced there, or under sequence parallelism reduce-scattered through `rows`, and
// the replicated bias added once).
template <class T>
void tp_linear_out_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                           V2<const T> w, V1<const T> b, V2<T> rows = {}, Linear3DTransfers<T>* transfers = nullptr);
// Sequence parallelism: dy holds this rank's rows; they are gathered into dy_rows (B*T, C),
// which the weight gradient reads next.
template <class T>
void tp_linear_out_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                                  V2<const T> dy, V2<const T> w, V2<T> dy_rows = {},
                                  Linear3DTransfers<T>* transfers = nullptr);
// dw += x^T dy, db += the column sums of dy (in 2D, SUMMA's ATB and the column's sums).
template <class T>
void tp_linear_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                               V2<const T> dy, V2<const T> x, Linear3DTransfers<T>* transfers = nullptr);

// The same layers with an activation that only feeds bf16 products kept as bf16
// (kernels/bf16.hpp, kernels/product_operand.hpp): the layer norm writes it rounded, the
// linears read it. Serial and 1D only (T = float): in 2D the SUMMA broadcasts its
// operands' blocks as T, and there (and in 3D) these are a logic_error.
template <class T>
void tp_layernorm_forward(const TensorParallel& tp, int64_t c_total, V2<kernels::bf16> y, V1<T> mean, V1<T> rstd,
                          V2<const T> x, V1<const T> w, V1<const T> b);
// (rows: as the T overloads take it; these are a logic_error under sequence parallelism,
// whose gathers move T)
template <class T>
void tp_linear_in_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y,
                          V2<const kernels::bf16> x, V2<const T> w, V1<const T> b, V2<T> rows = {},
                          Linear3DTransfers<T>* transfers = nullptr);
template <class T>
void tp_linear_out_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y,
                           V2<const kernels::bf16> x, V2<const T> w, V1<const T> b, V2<T> rows = {},
                           Linear3DTransfers<T>* transfers = nullptr);
template <class T>
void tp_linear_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                               V2<const T> dy, V2<const kernels::bf16> x, Linear3DTransfers<T>* transfers = nullptr);

}  // namespace strata
