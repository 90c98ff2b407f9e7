#pragma once
// The elementwise parts of a residual network's tanh layers (the products go through
// gemm): with z = u W (no bias yet),
//   forward step   out = u + dt * tanh(z + b)
//   opening layer  a = tanh(z + b)
//   backward gate  dz = g * (1 - tanh(z + b)^2)   (g: the gradient arriving at tanh's output)
#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/fast_exp.hpp"

namespace strata::kernels {

// tanh from one exp (libm's tanh is several times slower and does not vectorise): odd
// Taylor polynomial below |x| = 0.125 (where 1 - e^{-2|x|} would cancel; error < 1e-10),
// (1 - e) / (1 + e) with e = exp(-2|x|) above. Exact to rounding in double (exp is libm's
// there); a few 1e-7 relative in float.
template <class T>
KOKKOS_INLINE_FUNCTION T fast_tanh(T x) {
  const T a = x < T(0) ? -x : x;
  const T x2 = x * x;
  const T poly =
      x * (T(1) + x2 * (T(-1.0 / 3.0) + x2 * (T(2.0 / 15.0) + x2 * (T(-17.0 / 315.0) + x2 * T(62.0 / 2835.0)))));
  const T e = fast_exp<T>(T(-2) * a);
  const T t = (T(1) - e) / (T(1) + e);
  return a < T(0.125) ? poly : (x < T(0) ? -t : t);
}

// out (B, W) = u + dt * tanh(z + bias); out may alias u.
template <class T>
void residual_tanh_forward(V2<T> out, V2<const T> u, V2<const T> z, V1<const T> bias, T dt) {
  const int64_t w = z.extent(1);
  Kokkos::parallel_for(
      "residual_tanh_forward", Range(0, int64_t(z.size())), KOKKOS_LAMBDA(const int64_t k) {
        const int64_t i = k / w, j = k % w;
        out(i, j) = u(i, j) + dt * fast_tanh(z(i, j) + bias(j));
      });
}

// z (B, W) = tanh(z + bias), in place.
template <class T>
void bias_tanh(V2<T> z, V1<const T> bias) {
  const int64_t w = z.extent(1);
  Kokkos::parallel_for(
      "bias_tanh", Range(0, int64_t(z.size())), KOKKOS_LAMBDA(const int64_t k) {
        const int64_t i = k / w, j = k % w;
        z(i, j) = fast_tanh(z(i, j) + bias(j));
      });
}

// dz (B, W) = g * (1 - tanh(z + bias)^2); dz may alias z.
template <class T>
void tanh_gate_backward(V2<T> dz, V2<const T> g, V2<const T> z, V1<const T> bias) {
  const int64_t w = z.extent(1);
  Kokkos::parallel_for(
      "tanh_gate_backward", Range(0, int64_t(z.size())), KOKKOS_LAMBDA(const int64_t k) {
        const int64_t i = k / w, j = k % w;
        const T a = fast_tanh(z(i, j) + bias(j));
        dz(i, j) = g(i, j) * (T(1) - a * a);
      });
}

}  // namespace strata::kernels
