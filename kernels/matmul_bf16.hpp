#pragma once
// Matrix products with bf16 operands and fp32 accumulation (mixed precision): the float
// inputs are rounded to bf16 (round to nearest even), multiplied, and summed in fp32 into
// a float result. On CPUs, oneDNN's matmul (Debian's libdnnl 2.6), which runs bf16 on
// AVX512-BF16 or AMX; the primitive of each shape is made once and kept.
//   C (m, n) = op(A) op(B) + beta C,   op(X) = X or X^T, all row-major.
#include <string>

#include "core/tensor.hpp"

namespace strata::kernels {

// Whether bf16 products run natively here: a build with oneDNN on a CPU with
// AVX512-BF16 (or AMX). "" when they do, else why not (one line).
std::string bf16_products_unavailable();

// trans_a: a is stored (k, m); trans_b: b is stored (n, k). beta: 0 (overwrite) or any
// other value (accumulate, fp32).
void matmul_bf16(bool trans_a, bool trans_b, V2<const float> a, V2<const float> b, float beta, V2<float> c);

// x rounded to the nearest bf16 (ties to even), as a float: what matmul_bf16 multiplies.
float round_to_bf16(float x);

}  // namespace strata::kernels
