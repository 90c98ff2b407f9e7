#pragma once
// GELU, tanh approximation (GPT-2's, and PyTorch's approximate='tanh').
#include "core/kmath.hpp"
#include "core/tensor.hpp"

namespace strata::kernels {

template <class T>
KOKKOS_INLINE_FUNCTION T gelu_value(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2/pi)
  return T(0.5) * x * (T(1) + kmath::tanh(k * (x + T(0.044715) * x * x * x)));
}

// out = gelu(inp), elementwise over n values.
template <class T>
void gelu_forward(V1<T> out, V1<const T> inp) {
  Kokkos::parallel_for(
      "gelu_forward", Range(0, inp.extent(0)), KOKKOS_LAMBDA(const int64_t i) { out(i) = gelu_value(inp(i)); });
}

// dinp = gelu'(inp) * dout (dinp may alias dout).
template <class T>
void gelu_backward(V1<T> dinp, V1<const T> inp, V1<const T> dout) {
  Kokkos::parallel_for(
      "gelu_backward", Range(0, inp.extent(0)), KOKKOS_LAMBDA(const int64_t i) {
        const T k = T(0.7978845608028654);
        const T x = inp(i);
        const T u = k * (x + T(0.044715) * x * x * x);
        const T th = kmath::tanh(u);
        const T sech2 = T(1) - th * th;
        const T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * k * (T(1) + T(3) * T(0.044715) * x * x);
        dinp(i) = grad * dout(i);
      });
}

}  // namespace strata::kernels
