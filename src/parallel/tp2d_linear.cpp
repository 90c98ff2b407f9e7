#include "parallel/tp2d_linear.hpp"

#include "kernels/column_sums.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace strata {

template <class T>
void linear2d_forward(const TensorGrid2D& g, V2<T> y, V2<const T> x, V2<const T> w, V1<const T> bias) {
  summa_matmul_ab<T>(g, y, x, w);
  kernels::add_bias<T>(y, bias);
}

template <class T>
void linear2d_backward(const TensorGrid2D& g, V2<T> dx, V2<T> dw, V1<T> dbias, V2<const T> dy, V2<const T> x,
                       V2<const T> w) {
  if (g.q == 1) {  // one rank: the serial layer, bit for bit
    kernels::matmul_backward<T>(dx, dw, dbias, dy, x, w, g.precision);
    return;
  }
  summa_matmul_abt<T>(g, dx, dy, w);
  Tensor2<T> dw_step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "linear2d.dw"), dw.extent(0), dw.extent(1));
  summa_matmul_atb<T>(g, dw_step, x, dy);
  kernels::residual_accumulate<T>(V1<T>(dw.data(), dw.size()), V1<const T>(dw_step.data(), dw_step.size()));
  // dbias_j = column sums of dY over all rows: this grid row's rows here, the rest of
  // grid column j's rows by the all-reduce.
  Tensor1<T> local("linear2d.dbias", dy.extent(1));
  kernels::add_column_sums<T>(local, dy);
  g.col.allreduce_sum(V1<T>(local));
  kernels::residual_accumulate<T>(dbias, local);
}

template void linear2d_forward<float>(const TensorGrid2D&, V2<float>, V2<const float>, V2<const float>, V1<const float>);
template void linear2d_forward<double>(const TensorGrid2D&, V2<double>, V2<const double>, V2<const double>,
                                       V1<const double>);
template void linear2d_backward<float>(const TensorGrid2D&, V2<float>, V2<float>, V1<float>, V2<const float>,
                                       V2<const float>, V2<const float>);
template void linear2d_backward<double>(const TensorGrid2D&, V2<double>, V2<double>, V1<double>, V2<const double>,
                                        V2<const double>, V2<const double>);

}  // namespace strata
