#pragma once
// The linear layer: out = inp @ W + bias, weights stored (in, out) so that the forward is
// an AB product and the backward an ABT and an ATB product (the SUMMA shapes).
#include "kernels/column_sums.hpp"
#include "kernels/gemm.hpp"
#include "kernels/products.hpp"

namespace strata::kernels {

// inp is (N, IN), weight is (IN, OUT), bias is (OUT) or empty, out is (N, OUT).
// precision: of the products (products.hpp). X: T, or bf16 (an input that the kernel that
// made it wrote rounded for bf16 products: kernels/bf16.hpp).
template <class T, class X>
void matmul_forward_as(V2<T> out, V2<const X> inp, V2<const T> weight, V1<const T> bias,
                       ProductPrecision precision = Precision::FP32) {
  const int64_t n = out.extent(0), oc = out.extent(1);
  if constexpr (std::is_same_v<T, float>)
    if (precision == Precision::BF16 && bias.extent(0) > 0 && bf16_bias_in_product()) {
      // the bias in the product's epilogue (oneDNN): the same sums, no pass over out
      matmul_bf16_bias(precision.bf16_workspace(), false, false, inp, weight, bias, out);
      return;
    }
  T beta = 0;
  if (bias.extent(0) > 0) {
    // Seed out with the bias so that the gemm adds into it: no extra pass for the bias.
    Kokkos::parallel_for(
        "matmul_bias_fill", Range(0, n), KOKKOS_LAMBDA(const int64_t i) {
          for (int64_t j = 0; j < oc; ++j) out(i, j) = bias(j);
        });
    beta = 1;
  }
  product<T>(precision, "N", "N", inp, weight, beta, out);
}
template <class T>
void matmul_forward(V2<T> out, V2<const T> inp, V2<const T> weight, V1<const T> bias,
                    ProductPrecision precision = Precision::FP32) {
  matmul_forward_as<T, T>(out, inp, weight, bias, precision);
}
template <class T>
void matmul_forward(V2<T> out, V2<const bf16> inp, V2<const T> weight, V1<const T> bias, ProductPrecision precision) {
  matmul_forward_as<T, bf16>(out, inp, weight, bias, precision);
}

// out (N, OUT) += bias (OUT) on every row.
template <class T>
void add_bias(V2<T> out, V1<const T> bias) {
  const int64_t oc = out.extent(1);
  Kokkos::parallel_for(
      "add_bias", Range(0, out.extent(0)), KOKKOS_LAMBDA(const int64_t i) {
        for (int64_t j = 0; j < oc; ++j) out(i, j) += bias(j);
      });
}

// The backward's two halves, which zero-bubble pipeline schedules run apart: the input
// gradient dinp (N, IN) = dout weight^T, written; and the parameters' gradients, dweight
// (IN, OUT) += inp^T dout and dbias (OUT) += the column sums of dout (if not empty).
template <class T>
void matmul_backward_input(V2<T> dinp, V2<const T> dout, V2<const T> weight,
                           ProductPrecision precision = Precision::FP32) {
  product<T>(precision, "N", "T", dout, weight, T(0), dinp);
}
template <class T, class X>
void matmul_backward_weight_as(V2<T> dweight, V1<T> dbias, V2<const T> dout, V2<const X> inp,
                               ProductPrecision precision) {
  product<T>(precision, "T", "N", inp, dout, T(1), dweight);
  if (dbias.extent(0) > 0) add_column_sums<T>(dbias, dout);
}
template <class T>
void matmul_backward_weight(V2<T> dweight, V1<T> dbias, V2<const T> dout, V2<const T> inp,
                            ProductPrecision precision = Precision::FP32) {
  matmul_backward_weight_as<T, T>(dweight, dbias, dout, inp, precision);
}
template <class T>
void matmul_backward_weight(V2<T> dweight, V1<T> dbias, V2<const T> dout, V2<const bf16> inp,
                            ProductPrecision precision) {
  matmul_backward_weight_as<T, bf16>(dweight, dbias, dout, inp, precision);
}

// dout is (N, OUT). Accumulates dweight (IN, OUT) and dbias (OUT); writes dinp (N, IN)
// unless it is empty (the first layer needs no input gradient).
template <class T>
void matmul_backward(V2<T> dinp, V2<T> dweight, V1<T> dbias, V2<const T> dout, V2<const T> inp, V2<const T> weight,
                     ProductPrecision precision = Precision::FP32) {
  if (dinp.extent(0) > 0) matmul_backward_input<T>(dinp, dout, weight, precision);
  matmul_backward_weight<T>(dweight, dbias, dout, inp, precision);
}

}  // namespace strata::kernels
