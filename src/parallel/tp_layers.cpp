#include "parallel/tp_layers.hpp"

// Each layer is its split's operation (parallel/splits/split_calls.hpp).
namespace strata {

namespace {
template <class T, class Y>
void tp_layernorm_forward_any(const TensorParallel& tp, const LayerNormCall<T, Y>& call) {
  tp.visit([&](const auto& s) { s.template layernorm_forward<T, Y>(call); });
}

template <class T, class X>
void tp_linear_in_forward_any(const TensorParallel& tp, const LinearCall<T, X>& call) {
  tp.visit([&](const auto& s) { s.template linear_in_forward<T, X>(call); });
}

template <class T, class X>
void tp_linear_out_forward_any(const TensorParallel& tp, const LinearCall<T, X>& call) {
  tp.visit([&](const auto& s) { s.template linear_out_forward<T, X>(call); });
}

template <class T, class X>
void tp_linear_backward_weight_any(const TensorParallel& tp, const LinearWeightCall<T, X>& call) {
  tp.visit([&](const auto& s) { s.template linear_backward_weight<T, X>(call); });
}
}  // namespace

template <class T>
void tp_layernorm_forward(const TensorParallel& tp, int64_t c_total, V2<T> y, V1<T> mean, V1<T> rstd, V2<const T> x,
                          V1<const T> w, V1<const T> b) {
  tp_layernorm_forward_any<T, T>(tp, {c_total, y, mean, rstd, x, w, b});
}
template <class T>
void tp_layernorm_forward(const TensorParallel& tp, int64_t c_total, V2<kernels::bf16> y, V1<T> mean, V1<T> rstd,
                          V2<const T> x, V1<const T> w, V1<const T> b) {
  tp_layernorm_forward_any<T, kernels::bf16>(tp, {c_total, y, mean, rstd, x, w, b});
}

template <class T>
void tp_gather_rows(const TensorParallel& tp, V2<T> full, V2<const T> local) {
  tp.group()->allgather<T>(V1<const T>(local.data(), local.size()), V1<T>(full.data(), full.size()));
}

template <class T>
void tp_layernorm_backward(const TensorParallel& tp, int64_t c_total, V2<T> dx, V1<T> dw, V1<T> db, V2<const T> dy,
                           V2<const T> x, V1<const T> w, V1<const T> mean, V1<const T> rstd, bool accumulate) {
  const LayerNormBackwardCall<T> call{c_total, dx, dw, db, dy, x, w, mean, rstd, accumulate};
  tp.visit([&](const auto& s) { s.template layernorm_backward<T>(call); });
}

template <class T>
void tp_linear_in_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                          V2<const T> w, V1<const T> b, V2<T> rows, Linear3DTransfers<T>* transfers) {
  tp_linear_in_forward_any<T, T>(tp, {precision, y, x, w, b, rows, transfers});
}
template <class T>
void tp_linear_in_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y,
                          V2<const kernels::bf16> x, V2<const T> w, V1<const T> b, V2<T> rows,
                          Linear3DTransfers<T>* transfers) {
  tp_linear_in_forward_any<T, kernels::bf16>(tp, {precision, y, x, w, b, rows, transfers});
}

template <class T>
void tp_linear_in_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                                 V2<const T> dy, V2<const T> w, V2<T> rows, Linear3DTransfers<T>* transfers) {
  const LinearInputCall<T> call{precision, dx, dy, w, rows, transfers};
  tp.visit([&](const auto& s) { s.template linear_in_backward_input<T>(call); });
}

template <class T>
void tp_linear_out_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                           V2<const T> w, V1<const T> b, V2<T> rows, Linear3DTransfers<T>* transfers) {
  tp_linear_out_forward_any<T, T>(tp, {precision, y, x, w, b, rows, transfers});
}
template <class T>
void tp_linear_out_forward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> y,
                           V2<const kernels::bf16> x, V2<const T> w, V1<const T> b, V2<T> rows,
                           Linear3DTransfers<T>* transfers) {
  tp_linear_out_forward_any<T, kernels::bf16>(tp, {precision, y, x, w, b, rows, transfers});
}

template <class T>
void tp_linear_out_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                                  V2<const T> dy, V2<const T> w, V2<T> dy_rows, Linear3DTransfers<T>* transfers) {
  const LinearInputCall<T> call{precision, dx, dy, w, dy_rows, transfers};
  tp.visit([&](const auto& s) { s.template linear_out_backward_input<T>(call); });
}

template <class T>
void tp_linear_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                               V2<const T> dy, V2<const T> x, Linear3DTransfers<T>* transfers) {
  tp_linear_backward_weight_any<T, T>(tp, {precision, dw, db, dy, x, transfers});
}
template <class T>
void tp_linear_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dw, V1<T> db,
                               V2<const T> dy, V2<const kernels::bf16> x, Linear3DTransfers<T>* transfers) {
  tp_linear_backward_weight_any<T, kernels::bf16>(tp, {precision, dw, db, dy, x, transfers});
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
