#pragma once
// What each tensor-parallel operator of parallel/ sends, call for call, as Comm counts it
// (comm/traffic.hpp): one function per operator, beside the operators it describes and
// kept in step with them by the planner's validation (tests/plan). Sizes are this rank's
// local ones, as the operator sees them; e is the element size in bytes. Group names are
// the trainer's: "tensor" (the 1D group), "grid_row" and "grid_col" (the 2D grid),
// "tensor_x", "tensor_y" and "tensor_depth" (the 3D groups).
#include "comm/traffic.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

// tp_layers.hpp, for `rows` local rows (under sequence parallelism, the rows of the
// tensor-parallel region: B*T, of which each rank holds B*T/t elsewhere); in/out are the
// local input and output widths.
void tp_gather_rows_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e);
void tp_layernorm_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t e);
void tp_layernorm_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c_local, int64_t e);
void tp_linear_in_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                  int64_t e);
void tp_linear_in_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                   int64_t e);
void tp_linear_out_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                   int64_t e);
void tp_linear_out_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                    int64_t e);

// vocab_parallel.hpp: local rows, local hidden width c, local vocabulary block v.
void tp_embedding_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e);
void tp_embedding_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e);
void tp_head_logits_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t v, int64_t e);
void tp_head_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t v, int64_t e);
void tp_cross_entropy_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t e);

}  // namespace strata
