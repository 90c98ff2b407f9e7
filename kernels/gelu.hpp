#pragma once
// GELU, tanh approximation (GPT-2's, and PyTorch's approximate='tanh').
#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/bf16.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fast_exp.hpp"

namespace strata::kernels {

// 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): one exp
// instead of a tanh, which libm evaluates several times slower.
template <class T>
KOKKOS_INLINE_FUNCTION T gelu_sigmoid(T x) {
  const T two_k = T(1.5957691216057308);  // 2 sqrt(2/pi)
  return T(1) / (T(1) + fast_exp(-two_k * (x + T(0.044715) * x * x * x)));
}

template <class T>
KOKKOS_INLINE_FUNCTION T gelu_value(T x) {
  return x * gelu_sigmoid(x);
}

// out = gelu(inp), elementwise over n values. Out: T, or bf16 where the output only feeds
// bf16 products (written rounded, as they would round it).
template <class T, class Out>
void gelu_forward_as(V1<Out> out, V1<const T> inp) {
  for_each_element(
      "gelu_forward", inp.extent(0), KOKKOS_LAMBDA(const int64_t i) { out(i) = stored_as<Out>(gelu_value(inp(i))); });
}
template <class T>
void gelu_forward(V1<T> out, V1<const T> inp) {
  gelu_forward_as<T, T>(out, inp);
}
template <class T>
void gelu_forward(V1<bf16> out, V1<const T> inp) {
  if constexpr (std::is_same_v<T, float> && Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    // in chunks rounded by the CPU's own conversion (bf16.hpp: round_rows_to_bf16)
    constexpr int64_t kChunk = 1024;
    const int64_t n = inp.extent(0);
    for_each_row(
        "gelu_forward", (n + kChunk - 1) / kChunk, KOKKOS_LAMBDA(const int64_t chunk) {
          const int64_t j0 = chunk * kChunk, nj = n - j0 < kChunk ? n - j0 : kChunk;
          float values[kChunk];
#pragma GCC ivdep
          for (int64_t j = 0; j < nj; ++j) values[j] = gelu_value(inp(j0 + j));
          round_rows_to_bf16(values, 0, out.data() + j0, 0, 1, nj);
        });
  } else {
    gelu_forward_as<T, bf16>(out, inp);
  }
}

// dinp = gelu'(inp) * dout (dinp may alias dout).
template <class T>
void gelu_backward(V1<T> dinp, V1<const T> inp, V1<const T> dout) {
  for_each_element(
      "gelu_backward", inp.extent(0), KOKKOS_LAMBDA(const int64_t i) {
        // d/dx [x s(2u)] = s + x s (1 - s) 2 u'(x)
        const T two_k = T(1.5957691216057308);
        const T x = inp(i);
        const T s = gelu_sigmoid(x);
        const T grad = s + x * s * (T(1) - s) * two_k * (T(1) + T(3) * T(0.044715) * x * x);
        dinp(i) = grad * dout(i);
      });
}

}  // namespace strata::kernels
