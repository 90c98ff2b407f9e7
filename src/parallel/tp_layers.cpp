#include "parallel/tp_layers.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "parallel/tp2d_layernorm.hpp"
#include "parallel/tp2d_linear.hpp"
#include "parallel/tp3d_linear.hpp"

namespace strata {

namespace {

[[noreturn]] void bf16_operand_in_2d(const char* layer) {
  throw std::logic_error(std::string(layer) + ": an activation kept as bf16 under the 2D or 3D split");
}

// 3D: the layer norm's groups as the 2D layer norm takes them (statistics over X, the
// gains' gradients summed over depth; X need not equal depth, the 2D code reads q only
// as the row's size).
TensorGrid2D layernorm_groups_3d(const TensorParallel& tp) { return {*tp.x, *tp.z, tp.nx, 0, 0}; }

template <class T>
V1<const T> shard_of(V2<const T> w) {
  return V1<const T>(w.data(), w.size());
}
template <class T>
Linear3DTransfers<T>& transfers_of(Linear3DTransfers<T>* transfers) {
  if (!transfers) throw std::logic_error("tp_layers: a 3D linear without its transfers (the block's workspace)");
  return *transfers;
}

// a 3D linear's forward (its groups: in_linear or out_linear); X = bf16 is a logic_error
template <class T, class X>
void linear3d_forward_any(const Linear3DGroups& g, const char* layer, kernels::ProductPrecision precision, V2<T> y,
                          V2<const X> x, V2<const T> w, V1<const T> b, Linear3DTransfers<T>* transfers) {
  if constexpr (std::is_same_v<X, T>)
    linear3d_forward<T>(g, precision, y, x, shard_of(w), b, transfers_of(transfers));
  else
    bf16_operand_in_2d(layer);
}

// Y, X: the layer norm's output, the linears' input: T, or bf16 (serial and 1D only).
template <class T, class Y>
void layernorm_forward_any(const TensorParallel& tp, int64_t c_total, V2<Y> y, V1<T> mean, V1<T> rstd, V2<const T> x,
                           V1<const T> w, V1<const T> b) {
  if (tp.mode != TensorMode::TwoD && (tp.mode != TensorMode::ThreeD || tp.nx == 1))
    kernels::layernorm_forward<T>(y, mean, rstd, x, w, b);
  else if constexpr (std::is_same_v<Y, T>)
    layernorm2d_forward<T>(tp.mode == TensorMode::ThreeD ? layernorm_groups_3d(tp) : tp.grid(), c_total, y, mean, rstd,
                           x, w, b);
  else
    bf16_operand_in_2d("tp_layernorm_forward");
}

[[noreturn]] void bf16_operand_in_sequence_parallel(const char* layer) {
  throw std::logic_error(std::string(layer) + ": an activation kept as bf16 under sequence parallelism");
}

template <class T>
V1<T> flat(V2<T> v) {
  return V1<T>(v.data(), v.size());
}

template <class T, class X>
void linear_in_forward_any(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const X> x,
                           V2<const T> w, V1<const T> b, V2<T> rows, Linear3DTransfers<T>* transfers) {
  if (tp.mode == TensorMode::ThreeD) {
    linear3d_forward_any<T, X>(tp.in_linear(), "tp_linear_in_forward", precision, y, x, w, b, transfers);
  } else if (tp.row_split() > 1) {
    if constexpr (std::is_same_v<X, T>) {
      tp_gather_rows<T>(tp, rows, x);
      kernels::matmul_forward<T>(y, rows, w, b, precision);
    } else {
      bf16_operand_in_sequence_parallel("tp_linear_in_forward");
    }
  } else if (tp.mode != TensorMode::TwoD)
    kernels::matmul_forward<T>(y, x, w, b, precision);  // 1D: column-parallel, no communication
  else if constexpr (std::is_same_v<X, T>)
    linear2d_forward<T>(tp.grid(), precision, y, x, w, b);
  else
    bf16_operand_in_2d("tp_linear_in_forward");
}

template <class T, class X>
void linear_out_forward_any(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const X> x,
                            V2<const T> w, V1<const T> b, V2<T> rows, Linear3DTransfers<T>* transfers) {
  if (tp.mode == TensorMode::ThreeD) {
    linear3d_forward_any<T, X>(tp.out_linear(), "tp_linear_out_forward", precision, y, x, w, b, transfers);
  } else if (tp.row_split() > 1) {  // partial products of every row, this rank's rows of their sum, then the bias
    kernels::product<T>(precision, "N", "N", x, w, T(0), rows);
    tp.group->reduce_scatter_sum<T>(V1<const T>(rows.data(), rows.size()), flat(y));
    kernels::add_bias<T>(y, b);
  } else if (tp.mode == TensorMode::OneD) {
    // row-parallel: partial products over this rank's input features, summed, then the bias
    kernels::product<T>(precision, "N", "N", x, w, T(0), y);
    tp.group->allreduce_sum(V1<T>(y.data(), y.size()));
    kernels::add_bias<T>(y, b);
  } else if (tp.mode != TensorMode::TwoD) {
    kernels::matmul_forward<T>(y, x, w, b, precision);
  } else if constexpr (std::is_same_v<X, T>) {
    linear2d_forward<T>(tp.grid(), precision, y, x, w, b);
  } else {
    bf16_operand_in_2d("tp_linear_out_forward");
  }
}

template <class T, class X>
void linear_backward_weight_any(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                                V2<const T> dy, V2<const X> x, Linear3DTransfers<T>* transfers) {
  if (tp.mode == TensorMode::ThreeD) {  // the depth group's sums: the same for an in and an out linear
    if constexpr (std::is_same_v<X, T>)
      linear3d_backward_weight<T>(tp.in_linear(), precision, V1<T>(dw.data(), dw.size()), db, dy, x,
                                  transfers_of(transfers));
    else
      bf16_operand_in_2d("tp_linear_backward_weight");
  } else if (tp.mode != TensorMode::TwoD)  // 1D: this rank's columns (in) or rows (out) of dw; an out linear's db is
                                           // the same everywhere
    kernels::matmul_backward_weight<T>(dw, db, dy, x, precision);
  else if constexpr (std::is_same_v<X, T>)
    linear2d_backward_weight<T>(tp.grid(), precision, dw, db, dy, x);
  else
    bf16_operand_in_2d("tp_linear_backward_weight");
}

}  // namespace

template <class T>
void tp_layernorm_forward(const TensorParallel& tp, int64_t c_total, V2<T> y, V1<T> mean, V1<T> rstd, V2<const T> x,
                          V1<const T> w, V1<const T> b) {
  layernorm_forward_any<T, T>(tp, c_total, y, mean, rstd, x, w, b);
}
template <class T>
void tp_layernorm_forward(const TensorParallel& tp, int64_t c_total, V2<kernels::bf16> y, V1<T> mean, V1<T> rstd,
                          V2<const T> x, V1<const T> w, V1<const T> b) {
  layernorm_forward_any<T, kernels::bf16>(tp, c_total, y, mean, rstd, x, w, b);
}

template <class T>
void tp_gather_rows(const TensorParallel& tp, V2<T> full, V2<const T> local) {
  tp.group->allgather<T>(V1<const T>(local.data(), local.size()), flat(full));
}

template <class T>
void tp_layernorm_backward(const TensorParallel& tp, int64_t c_total, V2<T> dx, V1<T> dw, V1<T> db, V2<const T> dy,
                           V2<const T> x, V1<const T> w, V1<const T> mean, V1<const T> rstd, bool accumulate) {
  if (tp.mode == TensorMode::ThreeD && tp.nx > 1) {
    layernorm2d_backward<T>(layernorm_groups_3d(tp), c_total, dx, dw, db, dy, x, w, mean, rstd, accumulate);
  } else if (tp.mode == TensorMode::ThreeD) {  // the whole width here; the gains' gradients summed over depth
    const int64_t c = dw.extent(0);
    Tensor1<T> wb("layernorm.dwb", 2 * c);
    kernels::layernorm_backward<T>(dx, V1<T>(wb.data(), c), V1<T>(wb.data() + c, c), dy, x, w, mean, rstd, accumulate);
    if (tp.nz > 1) tp.z->allreduce_sum(V1<T>(wb));
    kernels::residual_accumulate<T>(dw, V1<const T>(wb.data(), c));
    kernels::residual_accumulate<T>(db, V1<const T>(wb.data() + c, c));
  } else if (tp.mode == TensorMode::TwoD) {
    layernorm2d_backward<T>(tp.grid(), c_total, dx, dw, db, dy, x, w, mean, rstd, accumulate);
  } else if (tp.row_split() > 1) {
    // this rank's rows' share of the gain's and bias' gradients, summed over the group
    // (then added: dw, db accumulate over micro-batches, which must not be summed again)
    const int64_t c = dw.extent(0);
    Tensor1<T> wb("layernorm.dwb", 2 * c);
    kernels::layernorm_backward<T>(dx, V1<T>(wb.data(), c), V1<T>(wb.data() + c, c), dy, x, w, mean, rstd, accumulate);
    tp.group->allreduce_sum(V1<T>(wb));
    kernels::residual_accumulate<T>(dw, V1<const T>(wb.data(), c));
    kernels::residual_accumulate<T>(db, V1<const T>(wb.data() + c, c));
  } else {
    kernels::layernorm_backward<T>(dx, dw, db, dy, x, w, mean, rstd, accumulate);
  }
}

template <class T>
void tp_linear_in_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                          V2<const T> w, V1<const T> b, V2<T> rows, Linear3DTransfers<T>* transfers) {
  linear_in_forward_any<T, T>(tp, precision, y, x, w, b, rows, transfers);
}
template <class T>
void tp_linear_in_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y,
                          V2<const kernels::bf16> x, V2<const T> w, V1<const T> b, V2<T> rows,
                          Linear3DTransfers<T>* transfers) {
  linear_in_forward_any<T, kernels::bf16>(tp, precision, y, x, w, b, rows, transfers);
}

template <class T>
void tp_linear_in_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                                 V2<const T> dy, V2<const T> w, V2<T> rows, Linear3DTransfers<T>* transfers) {
  if (tp.mode == TensorMode::ThreeD) {
    linear3d_backward_input<T>(tp.in_linear(), precision, dx, dy, shard_of(w), transfers_of(transfers));
    return;
  }
  if (tp.mode == TensorMode::TwoD) {
    linear2d_backward_input<T>(tp.grid(), precision, dx, dy, w);
    return;
  }
  if (tp.row_split() > 1) {  // every row's share from this rank's output columns; this rank's rows of their sum
    kernels::matmul_backward_input<T>(rows, dy, w, precision);
    tp.group->reduce_scatter_sum<T>(V1<const T>(rows.data(), rows.size()), flat(dx));
    return;
  }
  kernels::matmul_backward_input<T>(dx, dy, w, precision);
  // 1D: each rank's dx is its output columns' share of the input gradient
  if (tp.mode == TensorMode::OneD) tp.group->allreduce_sum(V1<T>(dx.data(), dx.size()));
}

template <class T>
void tp_linear_out_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                           V2<const T> w, V1<const T> b, V2<T> rows, Linear3DTransfers<T>* transfers) {
  linear_out_forward_any<T, T>(tp, precision, y, x, w, b, rows, transfers);
}
template <class T>
void tp_linear_out_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y,
                           V2<const kernels::bf16> x, V2<const T> w, V1<const T> b, V2<T> rows,
                           Linear3DTransfers<T>* transfers) {
  if (tp.row_split() > 1) bf16_operand_in_sequence_parallel("tp_linear_out_forward");
  linear_out_forward_any<T, kernels::bf16>(tp, precision, y, x, w, b, rows, transfers);
}

template <class T>
void tp_linear_out_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                                  V2<const T> dy, V2<const T> w, V2<T> dy_rows, Linear3DTransfers<T>* transfers) {
  if (tp.mode == TensorMode::ThreeD) {
    linear3d_backward_input<T>(tp.out_linear(), precision, dx, dy, shard_of(w), transfers_of(transfers));
  } else if (tp.mode == TensorMode::TwoD) {
    linear2d_backward_input<T>(tp.grid(), precision, dx, dy, w);
  } else if (tp.row_split() > 1) {  // every rank's rows of dy, then this rank's columns of dx
    tp_gather_rows<T>(tp, dy_rows, dy);
    kernels::matmul_backward_input<T>(dx, dy_rows, w, precision);
  } else {  // 1D: dy is replicated, so dx is this rank's columns
    kernels::matmul_backward_input<T>(dx, dy, w, precision);
  }
}

template <class T>
void tp_linear_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                               V2<const T> dy, V2<const T> x, Linear3DTransfers<T>* transfers) {
  linear_backward_weight_any<T, T>(tp, precision, dw, db, dy, x, transfers);
}
template <class T>
void tp_linear_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                               V2<const T> dy, V2<const kernels::bf16> x, Linear3DTransfers<T>* transfers) {
  linear_backward_weight_any<T, kernels::bf16>(tp, precision, dw, db, dy, x, transfers);
}

#define STRATA_TP_LAYERS_INSTANTIATE(T)                                                                                \
  template void tp_layernorm_forward<T>(const TensorParallel&, int64_t, V2<T>, V1<T>, V1<T>, V2<const T>, V1<const T>, \
                                        V1<const T>);                                                                  \
  template void tp_layernorm_backward<T>(const TensorParallel&, int64_t, V2<T>, V1<T>, V1<T>, V2<const T>,             \
                                         V2<const T>, V1<const T>, V1<const T>, V1<const T>, bool);                    \
  template void tp_gather_rows<T>(const TensorParallel&, V2<T>, V2<const T>);                                          \
  template void tp_linear_in_forward<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>,          \
                                        V2<const T>, V1<const T>, V2<T>, Linear3DTransfers<T>*);                       \
  template void tp_linear_in_backward_input<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>,   \
                                               V2<const T>, V2<T>, Linear3DTransfers<T>*);                             \
  template void tp_linear_out_forward<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>,         \
                                         V2<const T>, V1<const T>, V2<T>, Linear3DTransfers<T>*);                      \
  template void tp_linear_out_backward_input<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>,  \
                                                V2<const T>, V2<T>, Linear3DTransfers<T>*);                            \
  template void tp_linear_backward_weight<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V1<T>,           \
                                             V2<const T>, V2<const T>, Linear3DTransfers<T>*);
STRATA_TP_LAYERS_INSTANTIATE(float)
STRATA_TP_LAYERS_INSTANTIATE(double)
#undef STRATA_TP_LAYERS_INSTANTIATE
using kernels::bf16;
template void tp_layernorm_forward<float>(const TensorParallel&, int64_t, V2<bf16>, V1<float>, V1<float>,
                                          V2<const float>, V1<const float>, V1<const float>);
template void tp_linear_in_forward<float>(const TensorParallel&, kernels::ProductPrecision, V2<float>, V2<const bf16>,
                                          V2<const float>, V1<const float>, V2<float>, Linear3DTransfers<float>*);
template void tp_linear_out_forward<float>(const TensorParallel&, kernels::ProductPrecision, V2<float>, V2<const bf16>,
                                           V2<const float>, V1<const float>, V2<float>, Linear3DTransfers<float>*);
template void tp_linear_backward_weight<float>(const TensorParallel&, kernels::ProductPrecision, V2<float>, V1<float>,
                                               V2<const float>, V2<const bf16>, Linear3DTransfers<float>*);

}  // namespace strata
