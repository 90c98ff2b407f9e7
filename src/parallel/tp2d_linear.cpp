#include "parallel/tp2d_linear.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace strata {

template <class T>
void linear2d_forward(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> y, V2<const T> x, V2<const T> w,
                      V1<const T> bias) {
  summa_matmul_ab<T>(g, precision, y, x, w);
  kernels::add_bias<T>(y, bias);
}

template <class T>
void linear2d_backward_input(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> dx, V2<const T> dy,
                             V2<const T> w) {
  if (g.q == 1)  // one rank: the serial layer, bit for bit
    kernels::matmul_backward_input<T>(dx, dy, w, precision);
  else
    summa_matmul_abt<T>(g, precision, dx, dy, w);
}

template <class T>
void linear2d_backward_weight(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> dw, V1<T> dbias,
                              V2<const T> dy, V2<const T> x) {
  if (g.q == 1) {
    kernels::matmul_backward_weight<T>(dw, dbias, dy, x, precision);
    return;
  }
  Tensor2<T> dw_step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "linear2d.dw"), dw.extent(0), dw.extent(1));
  summa_matmul_atb<T>(g, precision, dw_step, x, dy);
  kernels::residual_accumulate<T>(V1<T>(dw.data(), dw.size()), V1<const T>(dw_step.data(), dw_step.size()));
  // dbias_j = column sums of dY over all rows: this grid row's rows here, the rest of
  // grid column j's rows by the all-reduce.
  Tensor1<T> local("linear2d.dbias", dy.extent(1));
  kernels::add_column_sums<T>(local, dy);
  g.col.allreduce_sum(V1<T>(local));
  kernels::residual_accumulate<T>(dbias, local);
}

template <class T>
void linear2d_backward(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> dx, V2<T> dw, V1<T> dbias,
                       V2<const T> dy, V2<const T> x, V2<const T> w) {
  linear2d_backward_input<T>(g, precision, dx, dy, w);
  linear2d_backward_weight<T>(g, precision, dw, dbias, dy, x);
}

template void linear2d_forward<float>(const TensorGrid2D&, kernels::ProductPrecision, V2<float>, V2<const float>,
                                      V2<const float>, V1<const float>);
template void linear2d_forward<double>(const TensorGrid2D&, kernels::ProductPrecision, V2<double>, V2<const double>,
                                       V2<const double>, V1<const double>);
#define STRATA_LINEAR2D_HALVES(T)                                                                                      \
  template void linear2d_backward_input<T>(const TensorGrid2D&, kernels::ProductPrecision, V2<T>, V2<const T>,         \
                                           V2<const T>);                                                               \
  template void linear2d_backward_weight<T>(const TensorGrid2D&, kernels::ProductPrecision, V2<T>, V1<T>, V2<const T>, \
                                            V2<const T>);
STRATA_LINEAR2D_HALVES(float)
STRATA_LINEAR2D_HALVES(double)
#undef STRATA_LINEAR2D_HALVES
template void linear2d_backward<float>(const TensorGrid2D&, kernels::ProductPrecision, V2<float>, V2<float>, V1<float>,
                                       V2<const float>, V2<const float>, V2<const float>);
template void linear2d_backward<double>(const TensorGrid2D&, kernels::ProductPrecision, V2<double>, V2<double>,
                                        V1<double>, V2<const double>, V2<const double>, V2<const double>);

}  // namespace strata
