#pragma once
// Matrix products with bf16 operands and fp32 accumulation (mixed precision): the float
// inputs are rounded to bf16 (round to nearest even), multiplied, and summed in fp32 into
// a float result. On CPUs, oneDNN's matmul (Debian's libdnnl 2.6), which runs bf16 on
// AVX512-BF16 or AMX; the primitive of each shape is made once and kept. On GPUs, cuBLAS
// with compute type 32F_FAST_16BF (tensor cores; compute capability 8.0 or later).
//   C (m, n) = op(A) op(B) + beta C,   op(X) = X or X^T, all row-major.
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.hpp"
#include "kernels/bf16.hpp"

namespace strata::kernels {

// Whether bf16 products run natively here: a CPU build with oneDNN on a CPU with
// AVX512-BF16 (or AMX), or a CUDA build on a GPU of compute capability 8.0 or later.
// "" when they do, else why not (one line).
std::string bf16_products_unavailable();
// The library that runs bf16 products in this build, with its version: "oneDNN 2.6.3",
// "cuBLAS", or "none" (strata --version).
std::string bf16_products_library();

// trans_a: a is stored (k, m); trans_b: b is stored (n, k). beta: 0 (overwrite) or any
// other value (accumulate, fp32).
void matmul_bf16(bool trans_a, bool trans_b, V2<const float> a, V2<const float> b, float beta, V2<float> c);
// The same with A already rounded: an activation its kernel wrote as bf16 (to_bf16, the
// products' own rounding, so the product is the same bit for bit). Only where products
// round their operands in a pass of their own (RoundedCopy::pays()); elsewhere a logic_error.
void matmul_bf16(bool trans_a, bool trans_b, V2<const bf16> a, V2<const float> b, float beta, V2<float> c);

// The same over `batch` matrices a fixed stride apart, on raw memory with leading
// dimensions (as gemm_strided_batched): C_i (m x n, rows ldc apart) at c + i * stride_c,
// op(A_i) (m x k) at a + i * stride_a, op(B_i) (k x n) at b + i * stride_b.
void matmul_bf16_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                                 int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                                 float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// The same with the A_i already rounded (a kernel wrote them as bf16), as the overload
// of matmul_bf16 below.
void matmul_bf16_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bf16* a,
                                 int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                                 float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// x rounded to bf16 (to_bf16), as a float: what matmul_bf16 multiplies.
inline float round_to_bf16(float x) { return to_float(to_bf16(x)); }

// A bf16 copy of a float buffer that many products read between its changes (a model's
// parameters: written once per optimizer update, read by every micro-batch's forward and
// backward). While one exists, a product whose operand lies inside the buffer multiplies
// the copy, rounded once, instead of rounding the operand again; the rounding is the
// same (to nearest, ties to even), so the product is the same bit for bit. The owner bumps
// *changes whenever it may have written the buffer; the next product that reads the copy
// remakes it first. Only where products round their operands in a separate pass
// (oneDNN); cuBLAS rounds inside the product, and there a copy would only cost memory.
class RoundedCopy {
 public:
  RoundedCopy(const float* values, int64_t n, const uint64_t* changes);
  // A buffer that does not change while the copy lives (an activation that the block
  // products of one pass read many times: attention's Q, K, V and output gradient).
  RoundedCopy(const float* values, int64_t n) : RoundedCopy(values, n, &unchanged_) {}
  ~RoundedCopy();
  RoundedCopy(const RoundedCopy&) = delete;
  RoundedCopy& operator=(const RoundedCopy&) = delete;
  int64_t bytes() const { return n_ * int64_t(sizeof(uint16_t)); }

  // Whether products here round their operands in a separate pass (so a copy pays).
  static bool pays();
  // The bf16 copy of [begin, begin + extent) if a live copy holds that range (remade
  // first if its buffer changed), else nullptr.
  static const uint16_t* lookup(const float* begin, int64_t extent);
  // Operands read from copies so far, in this process (tests: the copies were used).
  static int64_t reads();

 private:
  const float* values_;
  int64_t n_;
  const uint64_t* changes_;
  uint64_t unchanged_ = 0;
  uint64_t made_at_ = ~uint64_t(0);
  int64_t capacity_ = 0;
  std::unique_ptr<uint16_t[]> copy_;  // uninitialised until first made; from and back to a pool
};

}  // namespace strata::kernels
