#include "parallel/tp2d_layernorm.hpp"

#include "core/kmath.hpp"
#include "kernels/residual.hpp"

namespace strata {

void layernorm2d_forward(const TensorGrid2D& g, int64_t c_total, V2<float> y, V1<float> mean, V1<float> rstd,
                         V2<const float> x, V1<const float> weight, V1<const float> bias) {
  const int64_t r = x.extent(0), c = x.extent(1), q = g.q;
  // this rank's (mean, M2) per token
  Tensor1<float> part("ln2d.part", 2 * r), all("ln2d.all", 2 * r * q);
  Kokkos::parallel_for(
      "ln2d_part_stats", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        float m = 0;
        for (int64_t j = 0; j < c; ++j) m += x(i, j);
        m /= float(c);
        float m2 = 0;
        for (int64_t j = 0; j < c; ++j) m2 += (x(i, j) - m) * (x(i, j) - m);
        part(2 * i) = m;
        part(2 * i + 1) = m2;
      });
  g.row.allgather(part, all);  // all = q blocks of (mean, M2) per token, in column order
  Kokkos::parallel_for(
      "ln2d_normalise", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        // Chan et al.: parts of equal size c combine as mean = avg(m_k),
        // M2 = sum M2_k + c * sum (m_k - mean)^2
        float m = 0;
        for (int64_t k = 0; k < q; ++k) m += all(k * 2 * r + 2 * i);
        m /= float(q);
        float m2 = 0;
        for (int64_t k = 0; k < q; ++k) {
          const float d = all(k * 2 * r + 2 * i) - m;
          m2 += all(k * 2 * r + 2 * i + 1) + float(c) * d * d;
        }
        const float s = 1.0f / kmath::sqrt(m2 / float(c_total) + 1e-5f);
        for (int64_t j = 0; j < c; ++j) y(i, j) = (x(i, j) - m) * s * weight(j) + bias(j);
        mean(i) = m;
        rstd(i) = s;
      });
}

void layernorm2d_backward(const TensorGrid2D& g, int64_t c_total, V2<float> dx, V1<float> dweight, V1<float> dbias,
                          V2<const float> dy, V2<const float> x, V1<const float> weight, V1<const float> mean,
                          V1<const float> rstd) {
  const int64_t r = x.extent(0), c = x.extent(1);
  // per token: sum of w*dy and of w*dy*norm over the whole hidden dimension (row all-reduce)
  Tensor1<float> sums("ln2d.sums", 2 * r);
  Kokkos::parallel_for(
      "ln2d_backward_sums", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        float a = 0, b = 0;
        for (int64_t j = 0; j < c; ++j) {
          const float dn = weight(j) * dy(i, j);
          a += dn;
          b += dn * (x(i, j) - mean(i)) * rstd(i);
        }
        sums(2 * i) = a;
        sums(2 * i + 1) = b;
      });
  g.row.allreduce_sum(V1<float>(sums));
  Kokkos::parallel_for(
      "ln2d_backward_dx", Range(0, r), KOKKOS_LAMBDA(const int64_t i) {
        const float a = sums(2 * i) / float(c_total), b = sums(2 * i + 1) / float(c_total);
        for (int64_t j = 0; j < c; ++j) {
          const float norm = (x(i, j) - mean(i)) * rstd(i);
          dx(i, j) = (weight(j) * dy(i, j) - a - norm * b) * rstd(i);
        }
      });
  // weight and bias gradients: this grid row's tokens, then the column's other rows
  Tensor1<float> wb("ln2d.dwb", 2 * c);
  Kokkos::parallel_for(
      "ln2d_backward_params", Range(0, c), KOKKOS_LAMBDA(const int64_t j) {
        float dw = 0, db = 0;
        for (int64_t i = 0; i < r; ++i) {
          dw += (x(i, j) - mean(i)) * rstd(i) * dy(i, j);
          db += dy(i, j);
        }
        wb(j) = dw;
        wb(c + j) = db;
      });
  g.col.allreduce_sum(V1<float>(wb));
  kernels::residual_accumulate<float>(dweight, V1<const float>(wb.data(), c));
  kernels::residual_accumulate<float>(dbias, V1<const float>(wb.data() + c, c));
}

}  // namespace strata
