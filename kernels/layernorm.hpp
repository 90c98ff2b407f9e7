#pragma once
// Layer normalisation over the last dimension, eps = 1e-5 (as GPT-2 and PyTorch).
#include "core/kmath.hpp"
#include "kernels/bf16.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/lanes.hpp"
#include "kernels/row_reduce.hpp"

namespace strata::kernels {

// A row's mean and 1 / sqrt(variance + eps).
template <class T>
KOKKOS_INLINE_FUNCTION void row_moments(const T* x, int64_t c, T& m, T& s) {
  m = lane_sum<T>(c, [&](int64_t j) { return x[j]; }) / T(c);
  const T var = lane_sum<T>(c, [&](int64_t j) { return (x[j] - m) * (x[j] - m); }) / T(c);
  s = T(1) / kmath::sqrt(var + T(1e-5));
}

// inp, out are (N, C); weight, bias (C); mean, rstd (N) are saved for the backward. Out: T,
// or bf16 where the output only feeds bf16 products (written rounded, as they would round it).
template <class T, class Out>
void layernorm_forward_as(V2<Out> out, V1<T> mean, V1<T> rstd, V2<const T> inp, V1<const T> weight, V1<const T> bias) {
  const int64_t n = inp.extent(0), c = inp.extent(1);
  if constexpr (std::is_same_v<Out, bf16> && std::is_same_v<T, float> &&
                Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    // host memory: each row in segments, rounded by the CPU's own conversion (round_rows_to_bf16)
    for_each_row(
        "layernorm_forward", n, KOKKOS_LAMBDA(const int64_t i) {
          const T* x = &inp(i, 0);
          T m, s;
          row_moments(x, c, m, s);
          constexpr int64_t kSegment = 512;
          float segment[kSegment];
          for (int64_t j0 = 0; j0 < c; j0 += kSegment) {
            const int64_t nj = c - j0 < kSegment ? c - j0 : kSegment;
            for (int64_t j = 0; j < nj; ++j) segment[j] = (x[j0 + j] - m) * s * weight(j0 + j) + bias(j0 + j);
            round_rows_to_bf16(segment, 0, &out(i, j0), 0, 1, nj);
          }
          mean(i) = m;
          rstd(i) = s;
        });
  } else {
    for_each_row(
        "layernorm_forward", n, KOKKOS_LAMBDA(const int64_t i) {
          const T* x = &inp(i, 0);
          T m, s;
          row_moments(x, c, m, s);
          Out* y = &out(i, 0);
          for (int64_t j = 0; j < c; ++j) y[j] = stored_as<Out>((x[j] - m) * s * weight(j) + bias(j));
          mean(i) = m;
          rstd(i) = s;
        });
  }
}

template <class T>
void layernorm_forward(V2<T> out, V1<T> mean, V1<T> rstd, V2<const T> inp, V1<const T> weight, V1<const T> bias) {
  layernorm_forward_as<T, T>(out, mean, rstd, inp, weight, bias);
}
template <class T>
void layernorm_forward(V2<bf16> out, V1<T> mean, V1<T> rstd, V2<const T> inp, V1<const T> weight, V1<const T> bias) {
  layernorm_forward_as<T, bf16>(out, mean, rstd, inp, weight, bias);
}

// The weight and bias gradients' sums over the rows of dout (N, C), one thread per column
// (adjacent threads read adjacent memory; no atomics, a fixed order): written into
// dweight and dbias (C), or added to them (accumulate).
template <class T>
void layernorm_param_sums(V1<T> dweight, V1<T> dbias, V2<const T> dout, V2<const T> inp, V1<const T> mean,
                          V1<const T> rstd, bool accumulate) {
  const int64_t n = inp.extent(0), c = inp.extent(1);
  Kokkos::parallel_for(
      "layernorm_param_sums", Range(0, c), KOKKOS_LAMBDA(const int64_t j) {
        T dw = 0, db = 0;
        for (int64_t i = 0; i < n; ++i) {
          dw += (inp(i, j) - mean(i)) * rstd(i) * dout(i, j);
          db += dout(i, j);
        }
        dweight(j) = accumulate ? dweight(j) + dw : dw;
        dbias(j) = accumulate ? dbias(j) + db : db;
      });
}

// dout (N, C). Writes dinp (N, C) when accumulate_dinp is false, adds to it otherwise
// (the residual stream's gradient arrives there first). Accumulates dweight, dbias (C).
template <class T>
void layernorm_backward(V2<T> dinp, V1<T> dweight, V1<T> dbias, V2<const T> dout, V2<const T> inp, V1<const T> weight,
                        V1<const T> mean, V1<const T> rstd, bool accumulate_dinp) {
  const int64_t n = inp.extent(0), c = inp.extent(1);
  // dinp, row by row
  auto dinp_row = KOKKOS_LAMBDA(const int64_t i) {
    const T* x = &inp(i, 0);
    const T* dy = &dout(i, 0);
    const T m = mean(i), s = rstd(i);
    const T dnorm_mean = lane_sum<T>(c, [&](int64_t j) { return weight(j) * dy[j]; }) / T(c);
    const T dnorm_norm_mean = lane_sum<T>(c, [&](int64_t j) { return weight(j) * dy[j] * (x[j] - m) * s; }) / T(c);
    T* dx = &dinp(i, 0);
    for (int64_t j = 0; j < c; ++j) {
      const T norm = (x[j] - m) * s;
      const T g = (weight(j) * dy[j] - dnorm_mean - norm * dnorm_norm_mean) * s;
      dx[j] = accumulate_dinp ? dx[j] + g : g;
    }
  };
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    // CPU: one pass over rows that also sums [dweight | dbias] (cache-friendly).
    auto row = KOKKOS_LAMBDA(const int64_t i, T* sums) {
      dinp_row(i);
      const T m = mean(i), s = rstd(i);
      for (int64_t j = 0; j < c; ++j) {
        sums[j] += (inp(i, j) - m) * s * dout(i, j);
        sums[c + j] += dout(i, j);
      }
    };
    Tensor1<T> sums = reduce_rows<T>("layernorm_backward", n, 2 * c, row);
    Kokkos::parallel_for(
        "layernorm_backward_params", Range(0, c), KOKKOS_LAMBDA(const int64_t j) {
          dweight(j) += sums(j);
          dbias(j) += sums(c + j);
        });
  } else {
    // GPU: rows in parallel for dinp, then one thread per column for the weight gradients
    Kokkos::parallel_for("layernorm_backward_dinp", Range(0, n), dinp_row);
    layernorm_param_sums<T>(dweight, dbias, dout, inp, mean, rstd, true);
  }
}

}  // namespace strata::kernels
