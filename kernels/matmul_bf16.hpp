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

// The bf16 products' state of one model (its parameter store owns it): on CPUs, oneDNN's
// primitive of each product shape, made once; the live RoundedCopies, which products look
// their operands up in; and a stack of bf16 buffers for the operands a pass or a product
// rounds (the products of one model run one at a time, and the buffers are taken and
// given back in nested order). The stack grows to the most that is ever in use at once
// (the first step's high-water mark) and then stays: bytes() counts it, the model's
// workspace (StageModel::workspace_bytes) with it. Nothing here is process-wide.
class ProductWorkspace {
 public:
  ProductWorkspace();
  ~ProductWorkspace();
  ProductWorkspace(const ProductWorkspace&) = delete;
  ProductWorkspace& operator=(const ProductWorkspace&) = delete;

  // The rounding stack's bytes (after a step: its high-water mark; 0 where products round
  // inside the product, or in fp32).
  int64_t bytes() const;
  // Operands the products read from copies so far (tests: the copies were used).
  int64_t copy_reads() const;
  // The bf16 copy of [begin, begin + extent) if a live copy holds that range (remade
  // first if its buffer changed), else nullptr.
  const uint16_t* lookup(const float* begin, int64_t extent);
  // What a buffer of n values takes on the stack (n rounded up to 32: buffers 64 bytes
  // apart), for the models' predictions of its size.
  static int64_t stack_elements(int64_t n);

  // While one lives, the products of this workspace whose row count changes from call to
  // call (a mixture's experts: the tokens routed to each) take their rows and reduction
  // length at run time (oneDNN's runtime dimensions): one primitive per kind of product
  // instead of one per row count. Making a primitive JIT-compiles its kernel (0.3-0.7 ms
  // each), and the experts met a new row count at nearly every product of every step;
  // their operands are rounded by round_rows_to_bf16 (the same rounding), not by reorders
  // made per shape. Nested uses are fine.
  class RowsVary {
   public:
    explicit RowsVary(ProductWorkspace& workspace);
    ~RowsVary();
    RowsVary(const RowsVary&) = delete;
    RowsVary& operator=(const RowsVary&) = delete;

   private:
    ProductWorkspace& workspace_;
  };
  // The primitives made so far (tests: that row counts share one).
  int64_t primitives() const;

  struct State;  // kernels/matmul_bf16.cpp
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// trans_a: a is stored (k, m); trans_b: b is stored (n, k). beta: 0 (overwrite) or any
// other value (accumulate, fp32). The workspace is the calling model's.
void matmul_bf16(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const float> a, V2<const float> b,
                 float beta, V2<float> c);
// The same with A already rounded: an activation its kernel wrote as bf16 (to_bf16, the
// products' own rounding, so the product is the same bit for bit). Only where products
// round their operands in a pass of their own (RoundedCopy::pays()); elsewhere a logic_error.
void matmul_bf16(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const bf16> a, V2<const float> b,
                 float beta, V2<float> c);

// C (m, n) = op(A) op(B) + bias, the bias (n values) added to every row in the product's
// epilogue (oneDNN's bias argument: the same one fp32 addition to each sum as a C seeded
// with the bias and accumulated into, without that pass and without reading C: a
// product that accumulates into C ran 20-25% slower at the GPT's shapes). Only where
// bf16_bias_in_product(); elsewhere a logic_error.
bool bf16_bias_in_product();
void matmul_bf16_bias(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const float> a, V2<const float> b,
                      V1<const float> bias, V2<float> c);
void matmul_bf16_bias(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const bf16> a, V2<const float> b,
                      V1<const float> bias, V2<float> c);

// The same over `batch` matrices a fixed stride apart, on raw memory with leading
// dimensions (as gemm_strided_batched): C_i (m x n, rows ldc apart) at c + i * stride_c,
// op(A_i) (m x k) at a + i * stride_a, op(B_i) (k x n) at b + i * stride_b.
void matmul_bf16_strided_batched(ProductWorkspace& workspace, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                                 int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// The same with the A_i already rounded (a kernel wrote them as bf16), as the overload
// of matmul_bf16 above.
void matmul_bf16_strided_batched(ProductWorkspace& workspace, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const bf16* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                                 int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// x rounded to bf16 (to_bf16), as a float: what matmul_bf16 multiplies.
inline float round_to_bf16(float x) { return to_float(to_bf16(x)); }

// A bf16 copy of a float buffer that many products read between its changes (a model's
// parameters: written once per optimizer update, read by every micro-batch's forward and
// backward). While one exists, a product of its workspace whose operand lies inside the
// buffer multiplies the copy, rounded once, instead of rounding the operand again; the
// rounding is the same (to nearest, ties to even), so the product is the same bit for
// bit. The owner bumps *changes whenever it may have written the buffer; the next product
// that reads the copy remakes it first. Only where products round their operands in a
// separate pass (oneDNN); cuBLAS rounds inside the product, and there a copy would only
// cost memory.
class RoundedCopy {
 public:
  // A copy that owns its memory (the parameters' copy: counted with the store's state).
  RoundedCopy(ProductWorkspace& workspace, const float* values, int64_t n, const uint64_t* changes);
  // A buffer that does not change while the copy lives (an activation that the block
  // products of one pass read many times: attention's Q, K, V and output gradient); the
  // copy lies on the workspace's stack, so copies of a pass end in the reverse order.
  RoundedCopy(ProductWorkspace& workspace, const float* values, int64_t n);
  ~RoundedCopy();
  RoundedCopy(const RoundedCopy&) = delete;
  RoundedCopy& operator=(const RoundedCopy&) = delete;
  int64_t bytes() const { return n_ * int64_t(sizeof(uint16_t)); }

  // Whether products here round their operands in a separate pass (so a copy pays).
  static bool pays();
  // The copy's memory, for a kernel that writes every value of it rounded (to_bf16, the
  // products' rounding) instead of the float buffer: the copy counts as made, so products
  // read it and not the buffer (the cross-entropy's dlogits, written as bf16 only).
  bf16* fill();

 private:
  friend class ProductWorkspace;
  ProductWorkspace& workspace_;
  const float* values_;
  int64_t n_;
  const uint64_t* changes_;
  uint64_t unchanged_ = 0;
  uint64_t made_at_ = ~uint64_t(0);
  std::unique_ptr<uint16_t[]> owned_;  // the parameters' copy; a pass's lies on the stack
  uint16_t* copy_;                     // uninitialised until first made
};

}  // namespace strata::kernels
