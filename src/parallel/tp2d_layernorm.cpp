#include "parallel/tp2d_layernorm.hpp"

#include "core/kmath.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/residual.hpp"

namespace strata {

template <class T>
void layernorm2d_forward(const TensorGrid2D& g, int64_t c_total, V2<T> y, V1<T> mean, V1<T> rstd, V2<const T> x,
                         V1<const T> weight, V1<const T> bias) {
  if (g.q == 1) {  // one rank: the serial kernel, bit for bit
    kernels::layernorm_forward<T>(y, mean, rstd, x, weight, bias);
    return;
  }
  const int64_t r = x.extent(0), c = x.extent(1), q = g.q;
  // this rank's (mean, M2) per token
  Tensor1<T> part("ln2d.part", 2 * r), all("ln2d.all", 2 * r * q);
  Kokkos::parallel_for(
      "ln2d_part_stats", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        T m = 0;
        for (int64_t j = 0; j < c; ++j) m += x(i, j);
        m /= T(c);
        T m2 = 0;
        for (int64_t j = 0; j < c; ++j) m2 += (x(i, j) - m) * (x(i, j) - m);
        part(2 * i) = m;
        part(2 * i + 1) = m2;
      });
  g.row.allgather<T>(part, all);  // all = q blocks of (mean, M2) per token, in column order
  Kokkos::parallel_for(
      "ln2d_normalise", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        // Chan et al.: parts of equal size c combine as mean = avg(m_k),
        // M2 = sum M2_k + c * sum (m_k - mean)^2
        T m = 0;
        for (int64_t k = 0; k < q; ++k) m += all(k * 2 * r + 2 * i);
        m /= T(q);
        T m2 = 0;
        for (int64_t k = 0; k < q; ++k) {
          const T d = all(k * 2 * r + 2 * i) - m;
          m2 += all(k * 2 * r + 2 * i + 1) + T(c) * d * d;
        }
        const T s = T(1) / kmath::sqrt(m2 / T(c_total) + T(1e-5));
        for (int64_t j = 0; j < c; ++j) y(i, j) = (x(i, j) - m) * s * weight(j) + bias(j);
        mean(i) = m;
        rstd(i) = s;
      });
}

template <class T>
void layernorm2d_backward(const TensorGrid2D& g, int64_t c_total, V2<T> dx, V1<T> dweight, V1<T> dbias, V2<const T> dy,
                          V2<const T> x, V1<const T> weight, V1<const T> mean, V1<const T> rstd, bool accumulate) {
  if (g.q == 1) {
    kernels::layernorm_backward<T>(dx, dweight, dbias, dy, x, weight, mean, rstd, accumulate);
    return;
  }
  const int64_t r = x.extent(0), c = x.extent(1);
  // per token: sum of w*dy and of w*dy*norm over the whole hidden dimension (row all-reduce)
  Tensor1<T> sums("ln2d.sums", 2 * r);
  Kokkos::parallel_for(
      "ln2d_backward_sums", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        T a = 0, b = 0;
        for (int64_t j = 0; j < c; ++j) {
          const T dn = weight(j) * dy(i, j);
          a += dn;
          b += dn * (x(i, j) - mean(i)) * rstd(i);
        }
        sums(2 * i) = a;
        sums(2 * i + 1) = b;
      });
  g.row.allreduce_sum(V1<T>(sums));
  Kokkos::parallel_for(
      "ln2d_backward_dx", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        const T a = sums(2 * i) / T(c_total), b = sums(2 * i + 1) / T(c_total);
        for (int64_t j = 0; j < c; ++j) {
          const T norm = (x(i, j) - mean(i)) * rstd(i);
          const T d = (weight(j) * dy(i, j) - a - norm * b) * rstd(i);
          dx(i, j) = accumulate ? dx(i, j) + d : d;
        }
      });
  // weight and bias gradients: this grid row's tokens, then the column's other rows
  Tensor1<T> wb("ln2d.dwb", 2 * c);
  kernels::layernorm_param_sums<T>(V1<T>(wb.data(), c), V1<T>(wb.data() + c, c), dy, x, mean, rstd, false);
  g.col.allreduce_sum(V1<T>(wb));
  kernels::residual_accumulate<T>(dweight, V1<const T>(wb.data(), c));
  kernels::residual_accumulate<T>(dbias, V1<const T>(wb.data() + c, c));
}

template void layernorm2d_forward<float>(const TensorGrid2D&, int64_t, V2<float>, V1<float>, V1<float>, V2<const float>,
                                         V1<const float>, V1<const float>);
template void layernorm2d_forward<double>(const TensorGrid2D&, int64_t, V2<double>, V1<double>, V1<double>,
                                          V2<const double>, V1<const double>, V1<const double>);
template void layernorm2d_backward<float>(const TensorGrid2D&, int64_t, V2<float>, V1<float>, V1<float>,
                                          V2<const float>, V2<const float>, V1<const float>, V1<const float>,
                                          V1<const float>, bool);
template void layernorm2d_backward<double>(const TensorGrid2D&, int64_t, V2<double>, V1<double>, V1<double>,
                                           V2<const double>, V2<const double>, V1<const double>, V1<const double>,
                                           V1<const double>, bool);

}  // namespace strata
