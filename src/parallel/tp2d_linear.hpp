#pragma once
// The 2D (Optimus) linear layer on a q x q tensor grid: Y = X W + bias, with X split
// [rows/q (grid row i), k/q (grid column j)] and W split [k/q (i), n/q (j)], so Y comes out
// split like X. Forward is SUMMA AB, the backward SUMMA ABT (dX = dY W^T) and ATB
// (dW = X^T dY). The bias block j (n/q values) is kept by every rank of grid column j
// (q copies of a small vector, instead of the paper's n/q^2 shards and an all-gather);
// its gradient is summed over the column, so the copies stay identical.
#include "parallel/summa.hpp"

namespace strata {

// y (r, n/q) = x (r, k/q) w (k/q, n/q) + bias (n/q), r = this grid row's rows. Outputs
// come first, as in every parallel operator.
template <class T>
void linear2d_forward(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> y, V2<const T> x, V2<const T> w,
                      V1<const T> bias);

// dy (r, n/q). Writes dx (r, k/q); accumulates dw (k/q, n/q) and dbias (n/q).
template <class T>
void linear2d_backward(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> dx, V2<T> dw, V1<T> dbias,
                       V2<const T> dy, V2<const T> x, V2<const T> w);
// Its two halves (zero-bubble schedules run them apart): dx = ABT(dy, w); then
// dw += ATB(x, dy) and dbias += the column's sums of dy.
template <class T>
void linear2d_backward_input(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> dx, V2<const T> dy,
                             V2<const T> w);
template <class T>
void linear2d_backward_weight(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> dw, V1<T> dbias,
                              V2<const T> dy, V2<const T> x);

}  // namespace strata
