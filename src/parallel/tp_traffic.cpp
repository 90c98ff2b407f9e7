#include "parallel/tp_traffic.hpp"

namespace strata {
namespace {
constexpr const char* kTensor = "tensor";
constexpr const char* kRow = "grid_row";
constexpr const char* kCol = "grid_col";
constexpr const char* kX = "tensor_x";
constexpr const char* kY = "tensor_y";
constexpr const char* kDepth = "tensor_depth";

bool three_d(const TensorParallel& tp) { return tp.mode == TensorMode::ThreeD; }

// tp3d_linear.cpp for a linear whose input is split over `in_group` (of `in_ranks`) and
// output over `out_group`, local widths in -> out_w: the weight block gathered over depth
// (its shard: in / depth rows); forward: the output summed over the input's group;
// backward: the block gathered again, the input gradient summed over the output's group,
// the block's gradient reduce-scattered and the bias' summed over depth.
void linear3d_forward_traffic(Traffic& out, const TensorParallel& tp, const char* in_group, int in_ranks, int64_t rows,
                              int64_t in, int64_t out_w, int64_t e) {
  const int64_t shard = in / tp.nz * out_w * e;
  if (tp.nz > 1) out.add(kDepth, "allgather", Collective::AllGather, tp.nz, shard);
  if (in_ranks > 1) out.add(in_group, "allreduce", Collective::AllReduce, in_ranks, rows * out_w * e);
}
void linear3d_backward_traffic(Traffic& out, const TensorParallel& tp, const char* out_group, int out_ranks,
                               int64_t rows, int64_t in, int64_t out_w, int64_t e) {
  const int64_t shard = in / tp.nz * out_w * e;
  if (tp.nz > 1) out.add(kDepth, "allgather", Collective::AllGather, tp.nz, shard);
  if (out_ranks > 1) out.add(out_group, "allreduce", Collective::AllReduce, out_ranks, rows * in * e);
  if (tp.nz > 1) {
    out.add(kDepth, "reduce_scatter", Collective::ReduceScatter, tp.nz, shard);
    out.add(kDepth, "allreduce", Collective::AllReduce, tp.nz, out_w * e);  // the bias
  }
}

// linear2d_backward (tp2d_linear.cpp): dx = ABT(dy, w), dw = ATB(x, dy), the bias
// gradient summed over the column
void linear2d_backward_traffic(Traffic& out, int q, int64_t rows, int64_t in, int64_t out_w, int64_t e) {
  if (q == 1) return;
  summa_abt_traffic(out, q, rows, out_w, in, e);
  summa_atb_traffic(out, q, rows, in, out_w, e);
  out.add(kCol, "allreduce", Collective::AllReduce, q, out_w * e);
}
}  // namespace

void summa_ab_traffic(Traffic& out, int q, int64_t m, int64_t k, int64_t n, int64_t e) {
  if (q == 1) return;
  out.add(kRow, "broadcast", Collective::Broadcast, q, m * k * e, q);  // A_it along the row, each step
  out.add(kCol, "broadcast", Collective::Broadcast, q, k * n * e, q);  // B_tj down the column
}

void summa_abt_traffic(Traffic& out, int q, int64_t m, int64_t k, int64_t n, int64_t e) {
  if (q == 1) return;
  out.add(kCol, "broadcast", Collective::Broadcast, q, n * k * e, q);  // B_tj down the column
  out.add(kRow, "reduce", Collective::Reduce, q, m * n * e, q);        // partial C_it along the row
}

void summa_atb_traffic(Traffic& out, int q, int64_t k, int64_t m, int64_t n, int64_t e) {
  if (q == 1) return;
  out.add(kRow, "broadcast", Collective::Broadcast, q, k * m * e, q);  // A_it along the row
  out.add(kCol, "reduce", Collective::Reduce, q, m * n * e, q);        // partial C_tj down the column
}

void tp_layernorm_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t e) {
  if (three_d(tp) && tp.nx > 1) out.add(kX, "allgather", Collective::AllGather, tp.nx, 2 * rows * e);
  if (tp.mode == TensorMode::TwoD && tp.q > 1)
    out.add(kRow, "allgather", Collective::AllGather, tp.q, 2 * rows * e);  // (mean, M2) per token
}

void tp_gather_rows_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e) {
  if (tp.row_split() > 1) out.add(kTensor, "allgather", Collective::AllGather, tp.t, rows / tp.t * c * e);
}

void tp_layernorm_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c_local, int64_t e) {
  if (tp.row_split() > 1)
    out.add(kTensor, "allreduce", Collective::AllReduce, tp.t, 2 * c_local * e);  // dweight, dbias
  if (three_d(tp)) {  // over X the two sums per token (the 2D layer norm), over depth the gains'
    if (tp.nx > 1) out.add(kX, "allreduce", Collective::AllReduce, tp.nx, 2 * rows * e);
    if (tp.nx > 1 || tp.nz > 1) out.add(kDepth, "allreduce", Collective::AllReduce, tp.nz, 2 * c_local * e);
    return;
  }
  if (tp.mode != TensorMode::TwoD || tp.q == 1) return;
  out.add(kRow, "allreduce", Collective::AllReduce, tp.q, 2 * rows * e);     // two sums per token
  out.add(kCol, "allreduce", Collective::AllReduce, tp.q, 2 * c_local * e);  // dweight, dbias
}

void tp_linear_in_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                  int64_t e) {
  if (three_d(tp)) linear3d_forward_traffic(out, tp, kX, tp.nx, rows, in, out_w, e);
  if (tp.mode == TensorMode::TwoD) summa_ab_traffic(out, tp.q, rows, in, out_w, e);
  tp_gather_rows_traffic(out, tp, rows, in, e);
}

void tp_linear_in_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                   int64_t e) {
  if (three_d(tp)) linear3d_backward_traffic(out, tp, kY, tp.ny, rows, in, out_w, e);
  if (tp.mode == TensorMode::TwoD) linear2d_backward_traffic(out, tp.q, rows, in, out_w, e);
  if (tp.row_split() > 1)
    out.add(kTensor, "reduce_scatter", Collective::ReduceScatter, tp.t, rows / tp.t * in * e);
  else if (tp.mode == TensorMode::OneD)
    out.add(kTensor, "allreduce", Collective::AllReduce, tp.t, rows * in * e);
}

void tp_linear_out_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                   int64_t e) {
  if (three_d(tp)) linear3d_forward_traffic(out, tp, kY, tp.ny, rows, in, out_w, e);
  if (tp.mode == TensorMode::TwoD) summa_ab_traffic(out, tp.q, rows, in, out_w, e);
  if (tp.row_split() > 1)
    out.add(kTensor, "reduce_scatter", Collective::ReduceScatter, tp.t, rows / tp.t * out_w * e);
  else if (tp.mode == TensorMode::OneD)
    out.add(kTensor, "allreduce", Collective::AllReduce, tp.t, rows * out_w * e);
}

void tp_linear_out_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                    int64_t e) {
  if (three_d(tp)) linear3d_backward_traffic(out, tp, kX, tp.nx, rows, in, out_w, e);
  if (tp.mode == TensorMode::TwoD) linear2d_backward_traffic(out, tp.q, rows, in, out_w, e);
  tp_gather_rows_traffic(out, tp, rows, out_w, e);  // the output gradient's rows
}

void tp_embedding_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e) {
  if (tp.row_split() > 1)
    out.add(kTensor, "reduce_scatter", Collective::ReduceScatter, tp.t, rows / tp.t * c * e);
  else if (tp.mode == TensorMode::OneD)
    out.add(kTensor, "allreduce", Collective::AllReduce, tp.t, rows * c * e);
  if (tp.mode == TensorMode::TwoD)
    out.add(kCol, "reduce_scatter", Collective::ReduceScatter, tp.q, rows * c * e);  // even at q = 1
  if (three_d(tp) && tp.ny > 1) out.add(kY, "allreduce", Collective::AllReduce, tp.ny, rows * c * e);
}

void tp_embedding_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e) {
  if (tp.mode == TensorMode::TwoD) out.add(kCol, "allgather", Collective::AllGather, tp.q, rows * c * e);
  if (three_d(tp)) out.add(kDepth, "allgather", Collective::AllGather, tp.nz, rows * c * e);  // even at depth 1
  tp_gather_rows_traffic(out, tp, rows, c, e);
}

void tp_head_logits_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t v, int64_t e) {
  if (tp.mode == TensorMode::TwoD) summa_abt_traffic(out, tp.q, rows, c, v, e);
  if (three_d(tp) && tp.nx > 1) out.add(kX, "allreduce", Collective::AllReduce, tp.nx, rows * v * e);
  tp_gather_rows_traffic(out, tp, rows, c, e);  // the final layer norm's rows
}

void tp_head_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t v, int64_t e) {
  if (tp.mode == TensorMode::TwoD && tp.q > 1) {
    summa_atb_traffic(out, tp.q, rows, v, c, e);  // dwte = dlogits^T x
    summa_ab_traffic(out, tp.q, rows, v, c, e);   // dx = dlogits wte
  }
  if (tp.row_split() > 1)
    out.add(kTensor, "reduce_scatter", Collective::ReduceScatter, tp.t, rows / tp.t * c * e);
  else if (tp.mode == TensorMode::OneD)
    out.add(kTensor, "allreduce", Collective::AllReduce, tp.t, rows * c * e);
  if (three_d(tp)) {  // dx summed over Y; dwte's rows of this depth rank summed over depth
    if (tp.ny > 1) out.add(kY, "allreduce", Collective::AllReduce, tp.ny, rows * c * e);
    if (tp.nz > 1) out.add(kDepth, "allreduce", Collective::AllReduce, tp.nz, v * c * e);
  }
}

void tp_cross_entropy_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t e) {
  if (tp.mode == TensorMode::Serial) return;
  const char* group = tp.mode == TensorMode::OneD ? kTensor : three_d(tp) ? kY : kRow;
  const int ranks = tp.mode == TensorMode::OneD ? tp.t : three_d(tp) ? tp.ny : tp.q;
  out.add(group, "allreduce_max", Collective::AllReduce, ranks, rows * e);  // row maxima
  out.add(group, "allreduce", Collective::AllReduce, ranks, 2 * rows * e);  // sum of exp, target logit
}

}  // namespace strata
