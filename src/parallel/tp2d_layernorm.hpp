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
void layernorm2d_forward(const TensorGrid2D& g, int64_t c_total, V2<float> y, V1<float> mean, V1<float> rstd,
                         V2<const float> x, V1<const float> weight, V1<const float> bias);

// Writes dx (r, C/q); accumulates dweight, dbias (C/q).
void layernorm2d_backward(const TensorGrid2D& g, int64_t c_total, V2<float> dx, V1<float> dweight, V1<float> dbias,
                          V2<const float> dy, V2<const float> x, V1<const float> weight, V1<const float> mean,
                          V1<const float> rstd);

}  // namespace strata
