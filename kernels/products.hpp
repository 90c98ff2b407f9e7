#pragma once
// A matrix product in the run's precision: fp32 through gemm (BLAS), or bf16 operands
// with fp32 accumulation through matmul_bf16 (float only; double, the gradient checks'
// type, is always exact). The GPT's linear layers, attention, LM head and SUMMA products
// go through here; their callers pass the precision the deck chose (model.precision).
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "core/deck_choices.hpp"
#include "kernels/gemm.hpp"
#include "kernels/matmul_bf16.hpp"

namespace strata::kernels {

// The precision of a caller's products (model.precision) and, for bf16, whether operands
// that many products read are rounded once (model.bf16_round_once, the default) or by
// every product (false: the reference the tests compare with; the same bits), and the
// calling model's ProductWorkspace, which bf16 products need (its parameter store owns
// it). Converts from and to Precision, so a caller that has no choice to make passes a
// Precision (fp32, or double: no workspace needed).
struct ProductPrecision {
  Precision type = Precision::FP32;
  bool round_once = true;
  ProductWorkspace* workspace = nullptr;
  ProductPrecision(Precision p = Precision::FP32, bool once = true, ProductWorkspace* ws = nullptr)
      : type(p), round_once(once), workspace(ws) {}
  operator Precision() const { return type; }
  // The workspace of a bf16 product (a logic_error if the caller passed none).
  ProductWorkspace& bf16_workspace() const {
    if (!workspace) throw std::logic_error("a bf16 product without its model's ProductWorkspace");
    return *workspace;
  }
};

// An operand that many bf16 products of one pass read (attention's blocks of Q, K, V and
// of the output gradient): rounded to bf16 once, while the returned copy lives, instead of
// in every product (the same rounding: the same results). nullptr where products do not
// round in a pass of their own, in fp32, or without round_once.
template <class T>
std::unique_ptr<RoundedCopy> round_for_pass(ProductPrecision precision, const T* values, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (precision.type == Precision::BF16 && precision.round_once && RoundedCopy::pays())
      return std::make_unique<RoundedCopy>(precision.bf16_workspace(), values, n);
  (void)values, (void)n;
  return nullptr;
}

// Whether a kernel that makes an operand only products read (attention's probability and
// score-gradient blocks) writes it as bf16, rounded as the products would round it
// (kernels/bf16.hpp), instead of in T for them to round: bf16 products that round in a
// pass of their own, with rounding once on (model.bf16_round_once).
template <class T>
bool writes_bf16_operands(ProductPrecision precision) {
  return std::is_same_v<T, float> && precision.type == Precision::BF16 && precision.round_once && RoundedCopy::pays();
}

// c = op(a) op(b) + beta c (alpha 1), as gemm<T>("N"/"T", "N"/"T", 1, a, b, beta, c).
template <class T>
void product(ProductPrecision precision, const char* ta, const char* tb, V2<const T> a, V2<const T> b, T beta,
             V2<T> c) {
  if constexpr (std::is_same_v<T, float>) {
    if (precision == Precision::BF16) {
      matmul_bf16(precision.bf16_workspace(), ta[0] == 'T', tb[0] == 'T', a, b, beta, c);
      return;
    }
  }
  gemm<T>(ta, tb, T(1), a, b, beta, c);
}

// The same with A an activation its kernel wrote as bf16 (kernels/bf16.hpp): bf16 products
// only, where they round in a pass of their own (RoundedCopy::pays()).
template <class T>
void product(ProductPrecision precision, const char* ta, const char* tb, V2<const bf16> a, V2<const T> b, T beta,
             V2<T> c) {
  if constexpr (std::is_same_v<T, float>)
    if (precision == Precision::BF16)
      return matmul_bf16(precision.bf16_workspace(), ta[0] == 'T', tb[0] == 'T', a, b, beta, c);
  (void)ta, (void)tb, (void)a, (void)b, (void)beta, (void)c;
  throw std::logic_error("product: a bf16 operand in a product that is not bf16");
}

// C_i = op(A_i) op(B_i) + beta C_i over `batch` matrices a fixed stride apart, as
// gemm_strided_batched<T>(ta, tb, m, n, k, 1, a, lda, stride_a, ..., beta, c, ldc, stride_c, batch).
template <class T>
void product_strided_batched(ProductPrecision precision, char ta, char tb, int64_t m, int64_t n, int64_t k, const T* a,
                             int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, T beta, T* c,
                             int64_t ldc, int64_t stride_c, int64_t batch) {
  if constexpr (std::is_same_v<T, float>) {
    if (precision == Precision::BF16) {
      matmul_bf16_strided_batched(precision.bf16_workspace(), ta == 'T', tb == 'T', m, n, k, a, lda, stride_a, b, ldb,
                                  stride_b, beta, c, ldc, stride_c, batch);
      return;
    }
  }
  gemm_strided_batched<T>(ta, tb, m, n, k, T(1), a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

// The same with the A_i written as bf16 by the kernel that made them (bf16 products only,
// as the bf16 overload of product).
template <class T>
void product_strided_batched(ProductPrecision precision, char ta, char tb, int64_t m, int64_t n, int64_t k,
                             const bf16* a, int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b,
                             T beta, T* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if constexpr (std::is_same_v<T, float>)
    if (precision == Precision::BF16)
      return matmul_bf16_strided_batched(precision.bf16_workspace(), ta == 'T', tb == 'T', m, n, k, a, lda, stride_a, b,
                                         ldb, stride_b, beta, c, ldc, stride_c, batch);
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)stride_a, (void)b, (void)ldb;
  (void)stride_b, (void)beta, (void)c, (void)ldc, (void)stride_c, (void)batch;
  throw std::logic_error("product_strided_batched: a bf16 operand in a product that is not bf16");
}

}  // namespace strata::kernels
