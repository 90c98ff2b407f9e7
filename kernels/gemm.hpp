#pragma once
// General matrix products on row-major views. Every product in strata goes through
// here, so a BLAS does the flops: cuBLAS for device memory in CUDA builds, OpenBLAS's
// OpenMP build through CBLAS on CPUs (its threads are the rank's OpenMP threads; a product
// called inside a parallel region runs on its calling thread).
#include "core/tensor.hpp"

#if defined(KOKKOS_ENABLE_CUDA)
#include <cublas_v2.h>

#include <stdexcept>
#include <string>
#else
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#endif

namespace strata::kernels {

#if defined(KOKKOS_ENABLE_CUDA)
namespace detail {
// One cuBLAS handle per process, bound to Kokkos' default CUDA stream so products are
// ordered with the Kokkos kernels around them (as KokkosKernels keeps its own singleton).
inline cublasHandle_t cublas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    cublasSetStream(h, Kokkos::Cuda().cuda_stream());
    return h;
  }();
  return handle;
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(int(s)));
}
// A row-major (r x c) matrix is a column-major (c x r) one: C = op(A) op(B) in row-major
// is C^T = op(B)^T op(A)^T in column-major, i.e. the same call with A and B swapped.
inline void gemm_colmajor(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const float* a,
                          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  check(cublasSgemm(cublas_handle(), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc), "cublasSgemm");
}
inline void gemm_colmajor(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                          const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  check(cublasDgemm(cublas_handle(), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc), "cublasDgemm");
}
inline void gemm_colmajor_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                                  const float* a, int lda, long long sa, const float* b, int ldb, long long sb,
                                  float beta, float* c, int ldc, long long sc, int batch) {
  check(cublasSgemmStridedBatched(cublas_handle(), ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c, ldc, sc,
                                  batch),
        "cublasSgemmStridedBatched");
}
inline void gemm_colmajor_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                                  const double* a, int lda, long long sa, const double* b, int ldb, long long sb,
                                  double beta, double* c, int ldc, long long sc, int batch) {
  check(cublasDgemmStridedBatched(cublas_handle(), ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb, &beta, c, ldc, sc,
                                  batch),
        "cublasDgemmStridedBatched");
}
}  // namespace detail
#else
namespace detail {
inline CBLAS_TRANSPOSE cblas_op(char t) { return t == 'T' ? CblasTrans : CblasNoTrans; }
inline void cblas_gemm(char ta, char tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                       int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void cblas_gemm(char ta, char tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                       int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
// OpenBLAS cuts a long inner dimension K into blocks of its own (GEMM_Q, about 320 for
// sgemm's AVX-512 kernels) and rounds C after each; threaded, it cuts some shapes
// otherwise (a weight gradient of 64 x 256 over 324 or more rows gives other bits with 2
// threads than with 1: tests/kernels/thread_bits). strata adds K up in slices of kSliceK,
// each one OpenBLAS block, so a product's bits do not depend on the thread count.
constexpr int kSliceK = 256;
template <class T>
void gemm_sliced(char ta, char tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta, T* c,
                 int ldc) {
  if (k <= kSliceK) return cblas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (int k0 = 0; k0 < k; k0 += kSliceK) {
    const int kk = k - k0 < kSliceK ? k - k0 : kSliceK;
    // op(A) (m x k): columns k0.. of A, or rows k0.. of a transposed A; op(B) (k x n) likewise
    const T* a0 = ta == 'T' ? a + int64_t(k0) * lda : a + k0;
    const T* b0 = tb == 'T' ? b + k0 : b + int64_t(k0) * ldb;
    cblas_gemm(ta, tb, m, n, kk, alpha, a0, lda, b0, ldb, k0 == 0 ? beta : T(1), c, ldc);
  }
}

// The output blocks a product is cut into, by its shape alone: along the longer of C's
// rows and columns, a power of two of them (so 2, 4, 8 or 16 threads share them evenly),
// at most kMaxBlocks, each at least kMinBlock long (a multiple of 16). Every block packs
// the operand all blocks share again (OpenBLAS packs each call's operands): blocks of 32
// (before 2026-12-07) spent 11% of a GPT-2 step with 256 rows packing, blocks of 128
// 7% (docs/benchmarks.md).
constexpr int kMaxBlocks = 16, kMinBlock = 128;
inline int block_size(int extent) {
  int blocks = std::max(1, std::min(kMaxBlocks, extent / kMinBlock));
  while (blocks & (blocks - 1)) blocks &= blocks - 1;  // the largest power of two not above it
  const int size = (extent + blocks - 1) / blocks;
  return (size + 15) / 16 * 16;
}

// Whether the rank's threads share a product strata's way (the default) or OpenBLAS's
// (STRATA_GEMM_THREADS=openblas: its own threading, whose bits depend on the thread count
// with some of its kernels; for measuring what strata's way costs, docs/benchmarks.md).
inline bool openblas_threads_products() {
  static const bool openblas = [] {
    const char* v = std::getenv("STRATA_GEMM_THREADS");
    return v && std::string(v) == "openblas";
  }();
  return openblas;
}

// C = alpha op(A) op(B) + beta C, the same bits on any thread count: C is cut into fixed
// blocks (block_size: by the shape, not the threads), each block one single-threaded BLAS
// call (OpenBLAS runs single-threaded inside a parallel region) on its rows of op(A) or
// columns of op(B), K added up in slices (gemm_sliced); the rank's threads take the blocks.
// So every element of C is summed by the same call, in the same order, whatever the thread
// count or the kernels OpenBLAS picked for the CPU.
template <class T>
void gemm_rowmajor(char ta, char tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
                   T* c, int ldc) {
  if (openblas_threads_products()) return gemm_sliced(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const bool by_rows = m >= n;
  const int extent = by_rows ? m : n, size = block_size(extent), blocks = (extent + size - 1) / size;
  const auto block = [=](int i) {
    const int lo = i * size, len = std::min(size, extent - lo);
    if (by_rows)  // rows lo.. of op(A) and of C
      gemm_sliced(ta, tb, len, n, k, alpha, ta == 'T' ? a + lo : a + int64_t(lo) * lda, lda, b, ldb, beta,
                  c + int64_t(lo) * ldc, ldc);
    else  // columns lo.. of op(B) and of C
      gemm_sliced(ta, tb, m, len, k, alpha, a, lda, tb == 'T' ? b + int64_t(lo) * ldb : b + lo, ldb, beta, c + lo, ldc);
  };
  if (blocks == 1 || omp_in_parallel() || Kokkos::DefaultHostExecutionSpace().concurrency() == 1) {
    for (int i = 0; i < blocks; ++i) block(i);
    return;
  }
  Kokkos::parallel_for("gemm_blocks", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, blocks),
                       [=](const int i) { block(i); });
}
}  // namespace detail
#endif

// C = alpha * op(A) * op(B) + beta * C, op = "N" or "T".
// A is (m,k) or (k,m), B is (k,n) or (n,k), C is (m,n).
template <class T>
void gemm(const char* trans_a, const char* trans_b, T alpha, V2<const T> a, V2<const T> b, T beta, V2<T> c) {
#if defined(KOKKOS_ENABLE_CUDA)
  const bool ta = trans_a[0] == 'T', tb = trans_b[0] == 'T';
  const int m = int(c.extent(0)), n = int(c.extent(1));
  const int k = int(ta ? a.extent(0) : a.extent(1));
  detail::gemm_colmajor(tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, alpha, b.data(),
                        int(b.extent(1)), a.data(), int(a.extent(1)), beta, c.data(), int(c.extent(1)));
#else
  const bool ta = trans_a[0] == 'T';
  const int m = int(c.extent(0)), n = int(c.extent(1));
  const int k = int(ta ? a.extent(0) : a.extent(1));
  if (m == 0 || n == 0) return;
  detail::gemm_rowmajor(trans_a[0], trans_b[0], m, n, k, alpha, a.data(), int(a.extent(1)), b.data(), int(b.extent(1)),
                        beta, c.data(), int(c.extent(1)));
#endif
}

// Row-major products on raw memory with explicit leading dimensions, over `batch`
// matrices a fixed stride apart: C_i = alpha * op(A_i) op(B_i) + beta * C_i with
// C_i (m x n, row stride ldc) at c + i * stride_c, and so on; op(A_i) is (m x k).
// Submatrices of larger ones (a block of rows and columns) are such operands.
// On CPUs, a batch of at least as many products as the rank has threads is spread over
// the threads, one whole product each (the attention's small per-head products, which
// one product's own threading would not keep busy); a smaller batch runs one product at a
// time on all threads. Each product's result is the same either way.
template <class T>
void gemm_strided_batched(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                          int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, T beta, T* c, int64_t ldc,
                          int64_t stride_c, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
#if defined(KOKKOS_ENABLE_CUDA)
  // row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands
  detail::gemm_colmajor_batched(trans_b == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N,
                                int(n), int(m), int(k), alpha, b, int(ldb), stride_b, a, int(lda), stride_a, beta, c,
                                int(ldc), stride_c, int(batch));
#else
  const auto one = [=](int64_t i) {
    detail::gemm_rowmajor(trans_a, trans_b, int(m), int(n), int(k), alpha, a + i * stride_a, int(lda), b + i * stride_b,
                          int(ldb), beta, c + i * stride_c, int(ldc));
  };
  if (batch > 1 && batch >= Kokkos::DefaultHostExecutionSpace().concurrency()) {
    Kokkos::parallel_for("gemm_batch", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, batch),
                         [=](const int64_t i) { one(i); });
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
#endif
}

}  // namespace strata::kernels
