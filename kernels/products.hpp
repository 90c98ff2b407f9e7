#pragma once
// A matrix product in the run's precision: fp32 through gemm (BLAS), or bf16 operands
// with fp32 accumulation through matmul_bf16 (float only; double, the gradient checks'
// type, is always exact). The GPT's linear layers, LM head and SUMMA products go through
// here; their callers pass the precision the deck chose (model.precision).
#include <stdexcept>
#include <type_traits>

#include "core/parallel_modes.hpp"
#include "kernels/gemm.hpp"
#include "kernels/matmul_bf16.hpp"

namespace strata::kernels {

// c = op(a) op(b) + beta c (alpha 1), as gemm<T>("N"/"T", "N"/"T", 1, a, b, beta, c).
template <class T>
void product(Precision precision, const char* ta, const char* tb, V2<const T> a, V2<const T> b, T beta, V2<T> c) {
  if constexpr (std::is_same_v<T, float>) {
    if (precision == Precision::BF16) {
      matmul_bf16(ta[0] == 'T', tb[0] == 'T', a, b, beta, c);
      return;
    }
  }
  gemm<T>(ta, tb, T(1), a, b, beta, c);
}

}  // namespace strata::kernels
