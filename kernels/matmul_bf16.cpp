#include "kernels/matmul_bf16.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>

#include "kernels/gemm.hpp"
#endif
#include "kernels/bf16_products_dnnl.hpp"

namespace strata::kernels {

namespace {

bool cpu_has_bf16_products() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1u;
  const unsigned max_subleaf = a;
  bool avx512_bf16 = false;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512_bf16 = (a >> 5) & 1u;
  return avx512_bf16 || amx_bf16;
#else
  return false;
#endif
}

}  // namespace

std::string bf16_products_unavailable() {
#if defined(KOKKOS_ENABLE_CUDA)
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "no CUDA device answers";
  if (prop.major < 8)
    return std::string("this GPU (") + prop.name + ", compute capability " + std::to_string(prop.major) + "." +
           std::to_string(prop.minor) + ") has no bf16 tensor cores (8.0 or later)";
  return "";
#elif !defined(STRATA_HAVE_DNNL)
  return "this build has no oneDNN";
#else
  if (!cpu_has_bf16_products()) return "this CPU has neither AVX512-BF16 nor AMX-BF16";
  // oneDNN's own cap (ONEDNN_MAX_CPU_ISA, e.g. AVX2): its bf16 kernels would not run, and
  // the tests use it to see that a machine without bf16 reports their cases skipped
  const unsigned isa = unsigned(dnnl_get_effective_cpu_isa()), bf16 = unsigned(dnnl_cpu_isa_avx512_core_bf16);
  if ((isa & bf16) != bf16) return "oneDNN is limited below AVX512-BF16 (ONEDNN_MAX_CPU_ISA)";
  return "";
#endif
}

std::string bf16_products_library() {
#if defined(KOKKOS_ENABLE_CUDA)
  return "cuBLAS";
#elif defined(STRATA_HAVE_DNNL)
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
#else
  return "none";
#endif
}

using bf16_detail::Bf16Stack;
#ifdef STRATA_HAVE_DNNL
using bf16_detail::Bf16Products;
using bf16_detail::Bf16Shape;
#endif

struct ProductWorkspace::State {
  std::vector<RoundedCopy*> live;
  int64_t copy_reads = 0;
  int rows_vary = 0;  // RowsVary objects alive
  Bf16Stack stack;
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  Bf16Products products;
#endif
};

#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
namespace {
// The product of `shape` through the workspace's primitives, with the copies its live
// RoundedCopy objects hold for A (unless a_bits: A written as bf16) and B.
void run_product(ProductWorkspace& ws, ProductWorkspace::State& st, const Bf16Shape& s, const float* a,
                 const uint16_t* a_bits, const float* b, float* c, const float* bias = nullptr) {
  const uint16_t* a_copy =
      a_bits ? a_bits : ws.lookup(a, bf16_detail::operand_extent(s.batch, s.m, s.k, s.lda, s.sa, s.ta));
  const uint16_t* b_copy = ws.lookup(b, bf16_detail::operand_extent(s.batch, s.k, s.n, s.ldb, s.sb, s.tb));
  st.products.run(st.stack, s, a, a_copy, b, b_copy, c, bias);
}
}  // namespace
#endif

int64_t ProductWorkspace::stack_elements(int64_t n) { return bf16_detail::stack_elements(n); }

ProductWorkspace::ProductWorkspace() : state_(std::make_unique<State>()) {}
ProductWorkspace::~ProductWorkspace() = default;
int64_t ProductWorkspace::bytes() const { return state_->stack.bytes(); }
int64_t ProductWorkspace::copy_reads() const { return state_->copy_reads; }
int64_t ProductWorkspace::primitives() const {
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  return state_->products.primitives();
#else
  return 0;
#endif
}
ProductWorkspace::RowsVary::RowsVary(ProductWorkspace& workspace) : workspace_(workspace) {
  ++workspace_.state().rows_vary;
}
ProductWorkspace::RowsVary::~RowsVary() { --workspace_.state().rows_vary; }

const uint16_t* ProductWorkspace::lookup(const float* begin, int64_t extent) {
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  for (RoundedCopy* r : state_->live) {
    const auto first = reinterpret_cast<uintptr_t>(r->values_), at = reinterpret_cast<uintptr_t>(begin);
    if (at < first || (at - first) / sizeof(float) + uint64_t(extent) > uint64_t(r->n_)) continue;
    if (r->made_at_ != *r->changes_) {
      state_->products.round(r->values_, r->copy_, r->n_);
      r->made_at_ = *r->changes_;
    }
    ++state_->copy_reads;
    return r->copy_ + (begin - r->values_);
  }
#else
  (void)begin, (void)extent;
#endif
  return nullptr;
}

RoundedCopy::RoundedCopy(ProductWorkspace& workspace, const float* values, int64_t n, const uint64_t* changes)
    : workspace_(workspace), values_(values), n_(n), changes_(changes), owned_(new uint16_t[size_t(n)]),
      copy_(owned_.get()) {
  workspace_.state().live.push_back(this);
}

RoundedCopy::RoundedCopy(ProductWorkspace& workspace, const float* values, int64_t n)
    : workspace_(workspace), values_(values), n_(n), changes_(&unchanged_), copy_(workspace.state().stack.take(n)) {
  workspace_.state().live.push_back(this);
}

RoundedCopy::~RoundedCopy() {
  auto& live = workspace_.state().live;
  live.erase(std::remove(live.begin(), live.end(), this), live.end());
  if (!owned_) workspace_.state().stack.give_back(copy_);
}

bf16* RoundedCopy::fill() {
  made_at_ = *changes_;
  static_assert(sizeof(bf16) == sizeof(uint16_t));
  return reinterpret_cast<bf16*>(copy_);
}

bool RoundedCopy::pays() {
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  return true;
#else
  return false;
#endif
}

void matmul_bf16_strided_batched(ProductWorkspace& workspace, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                                 int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
#if defined(KOKKOS_ENABLE_CUDA)
  // fp32 operands in device memory, rounded to bf16 by cuBLAS on the way into the tensor
  // cores and accumulated in fp32 (compute type 32F_FAST_16BF); row-major C = op(A) op(B)
  // is column-major C^T = op(B)^T op(A)^T, as in gemm.hpp.
  (void)workspace;
  const float one = 1.0f;
  detail::check(
      cublasGemmStridedBatchedEx(detail::cublas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &one, b, CUDA_R_32F,
                                 int(ldb), stride_b, a, CUDA_R_32F, int(lda), stride_a, &beta, c, CUDA_R_32F, int(ldc),
                                 stride_c, int(batch), CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx (bf16)");
#elif defined(STRATA_HAVE_DNNL)
  auto& st = workspace.state();
  Bf16Shape shape{batch, m, n, k, trans_a, trans_b, beta, lda, stride_a, ldb, stride_b, ldc, stride_c};
  shape.rows_vary = st.rows_vary > 0;
  run_product(workspace, st, shape, a, nullptr, b, c);
#else
  (void)workspace, (void)trans_a, (void)trans_b, (void)k, (void)a, (void)lda, (void)stride_a, (void)b, (void)ldb;
  (void)stride_b, (void)beta, (void)c, (void)ldc, (void)stride_c;
  throw std::logic_error("matmul_bf16: " + bf16_products_unavailable());
#endif
}

namespace {
// m, n, k and the leading dimensions of C = op(A) op(B), A of either element type.
struct Bf16Operands {
  int64_t m, n, k, lda, ldb, ldc;
};
template <class A>
Bf16Operands operands_of(bool trans_a, bool trans_b, const A& a, V2<const float> b, V2<float> c) {
  const int64_t m = int64_t(c.extent(0)), n = int64_t(c.extent(1));
  const int64_t k = trans_a ? int64_t(a.extent(0)) : int64_t(a.extent(1));
  if ((trans_a ? a.extent(1) : a.extent(0)) != c.extent(0) || (trans_b ? b.extent(1) : b.extent(0)) != size_t(k) ||
      (trans_b ? b.extent(0) : b.extent(1)) != c.extent(1))
    throw std::logic_error("matmul_bf16: operand shapes do not match");
  return {m, n, k, int64_t(a.stride(0)), int64_t(b.stride(0)), int64_t(c.stride(0))};
}
}  // namespace

void matmul_bf16(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const float> a, V2<const float> b,
                 float beta, V2<float> c) {
  const auto o = operands_of(trans_a, trans_b, a, b, c);
  matmul_bf16_strided_batched(workspace, trans_a, trans_b, o.m, o.n, o.k, a.data(), o.lda, o.lda * int64_t(a.extent(0)),
                              b.data(), o.ldb, o.ldb * int64_t(b.extent(0)), beta, c.data(), o.ldc, o.ldc * o.m, 1);
}

void matmul_bf16_strided_batched(ProductWorkspace& workspace, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const bf16* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                                 int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  static_assert(sizeof(bf16) == sizeof(uint16_t));
  auto& st = workspace.state();
  Bf16Shape shape{batch, m, n, k, trans_a, trans_b, beta, lda, stride_a, ldb, stride_b, ldc, stride_c};
  shape.rows_vary = st.rows_vary > 0;
  run_product(workspace, st, shape, nullptr, reinterpret_cast<const uint16_t*>(a), b, c);
#else
  (void)workspace, (void)trans_a, (void)trans_b, (void)k, (void)a, (void)lda, (void)stride_a, (void)b, (void)ldb;
  (void)stride_b, (void)beta, (void)c, (void)ldc, (void)stride_c;
  throw std::logic_error(
      "matmul_bf16: an operand stored as bf16 is only read where products round in a pass of "
      "their own (oneDNN on CPUs)");
#endif
}

void matmul_bf16(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const bf16> a, V2<const float> b,
                 float beta, V2<float> c) {
  const auto o = operands_of(trans_a, trans_b, a, b, c);
  matmul_bf16_strided_batched(workspace, trans_a, trans_b, o.m, o.n, o.k, a.data(), o.lda, o.lda * int64_t(a.extent(0)),
                              b.data(), o.ldb, o.ldb * int64_t(b.extent(0)), beta, c.data(), o.ldc, o.ldc * o.m, 1);
}

bool bf16_bias_in_product() {
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  return true;
#else
  return false;
#endif
}

namespace {
template <class A>
void bias_product(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const A> a, V2<const float> b,
                  V1<const float> bias, V2<float> c) {
  const auto o = operands_of(trans_a, trans_b, a, b, c);
  if (int64_t(bias.extent(0)) != o.n) throw std::logic_error("matmul_bf16_bias: the bias is not one value per column");
  if (o.m == 0 || o.n == 0) return;
#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
  auto& st = workspace.state();
  Bf16Shape shape{1,
                  o.m,
                  o.n,
                  o.k,
                  trans_a,
                  trans_b,
                  0.0f,
                  o.lda,
                  o.lda * int64_t(a.extent(0)),
                  o.ldb,
                  o.ldb * int64_t(b.extent(0)),
                  o.ldc,
                  o.ldc * o.m};
  shape.bias = true;
  shape.rows_vary = st.rows_vary > 0;
  const bool rounded = std::is_same_v<A, bf16>;
  run_product(workspace, st, shape, rounded ? nullptr : reinterpret_cast<const float*>(a.data()),
                  rounded ? reinterpret_cast<const uint16_t*>(a.data()) : nullptr, b.data(), c.data(), bias.data());
#else
  (void)workspace, (void)bias;
  throw std::logic_error("matmul_bf16_bias: only where bf16_bias_in_product()");
#endif
}
}  // namespace

void matmul_bf16_bias(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const float> a, V2<const float> b,
                      V1<const float> bias, V2<float> c) {
  bias_product<float>(workspace, trans_a, trans_b, a, b, bias, c);
}
void matmul_bf16_bias(ProductWorkspace& workspace, bool trans_a, bool trans_b, V2<const bf16> a, V2<const float> b,
                      V1<const float> bias, V2<float> c) {
  bias_product<bf16>(workspace, trans_a, trans_b, a, b, bias, c);
}

}  // namespace strata::kernels
