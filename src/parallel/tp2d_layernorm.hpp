#pragma once
// Layer normalisation of activations split over the q x q tensor grid: a row of the
// hidden dimension C is spread over the q ranks of a grid row (C/q values each). Each rank
// computes its part's mean and sum of squared deviations; the grid row all-gathers these
// (2 values per token) and combines them with Chan's pairwise formula, which stays
// accurate where "E[x^2] - E[x]^2" cancels. Weight and bias block j are kept by every
// rank of grid column j; their gradients are summed over the column.
#include "parallel/summa.hpp"

namespace strata {

// x (r, C/q) -> y (r, C/q); mean, rstd (r) saved for the backward. c_total = C.
template <class T>
void layernorm2d_forward(const TensorGrid2D& g, int64_t c_total, V2<T> y, V1<T> mean, V1<T> rstd, V2<const T> x,
                         V1<const T> weight, V1<const T> bias);

// Writes dx (r, C/q), or adds to it if accumulate (a residual stream's gradient);
// accumulates dweight, dbias (C/q).
template <class T>
void layernorm2d_backward(const TensorGrid2D& g, int64_t c_total, V2<T> dx, V1<T> dweight, V1<T> dbias, V2<const T> dy,
                          V2<const T> x, V1<const T> weight, V1<const T> mean, V1<const T> rstd,
                          bool accumulate = false);

}  // namespace strata
