#include "parallel/tp2d_linear.hpp"

#include "kernels/residual.hpp"

namespace strata {

void linear2d_forward(const TensorGrid2D& g, V2<const float> x, V2<const float> w, V1<const float> bias, V2<float> y) {
  summa_matmul_ab(g, x, w, y);
  const int64_t n = y.extent(1);
  Kokkos::parallel_for(
      "linear2d_bias", Range(0, y.extent(0)), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t c = 0; c < n; ++c) y(r, c) += bias(c);
      });
}

void linear2d_backward(const TensorGrid2D& g, V2<const float> dy, V2<const float> x, V2<const float> w, V2<float> dx,
                       V2<float> dw, V1<float> dbias) {
  summa_matmul_abt(g, dy, w, dx);
  Tensor2<float> dw_step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "linear2d.dw"), dw.extent(0), dw.extent(1));
  summa_matmul_atb(g, x, dy, dw_step);
  kernels::residual_accumulate<float>(V1<float>(dw.data(), dw.size()), V1<const float>(dw_step.data(), dw_step.size()));
  // dbias_j = column sums of dY over all rows: this grid row's rows here, the rest of
  // grid column j's rows by the all-reduce.
  const int64_t rows = dy.extent(0), n = dy.extent(1);
  Tensor1<float> local("linear2d.dbias", n);
  Kokkos::parallel_for(
      "linear2d_dbias", Range(0, n), KOKKOS_LAMBDA(const int64_t c) {
        float s = 0;
        for (int64_t r = 0; r < rows; ++r) s += dy(r, c);
        local(c) = s;
      });
  g.col.allreduce_sum(V1<float>(local));
  kernels::residual_accumulate<float>(dbias, local);
}

}  // namespace strata
