#pragma once
// General matrix products on row-major views. Every product in strata goes through
// here, so a BLAS does the flops: cuBLAS for device memory in CUDA builds, KokkosBlas
// (which hands them to OpenBLAS) on CPUs.
#include "core/tensor.hpp"

#if defined(KOKKOS_ENABLE_CUDA)
#include <cublas_v2.h>

#include <stdexcept>
#include <string>
#else
#include <KokkosBlas3_gemm.hpp>
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
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(int(s)));
}
// A row-major (r x c) matrix is a column-major (c x r) one: C = op(A) op(B) in row-major
// is C^T = op(B)^T op(A)^T in column-major, i.e. the same call with A and B swapped.
inline void gemm_colmajor(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  check(cublasSgemm(cublas_handle(), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc), "cublasSgemm");
}
inline void gemm_colmajor(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                          const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  check(cublasDgemm(cublas_handle(), ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc), "cublasDgemm");
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
  KokkosBlas::gemm(trans_a, trans_b, alpha, a, b, beta, c);
#endif
}

// Batched product over the leading dimension: C[i] = alpha * op(A[i]) op(B[i]) + beta * C[i].
// A is (batch, ., .) etc.; each slice is contiguous row-major.
template <class T>
void gemm_batched(const char* trans_a, const char* trans_b, T alpha, V3<const T> a, V3<const T> b, T beta,
                  V3<T> c) {
  const int64_t batch = c.extent(0);
  const int64_t a_r = a.extent(1), a_c = a.extent(2), b_r = b.extent(1), b_c = b.extent(2);
  const int64_t c_r = c.extent(1), c_c = c.extent(2);
  for (int64_t i = 0; i < batch; ++i) {
    gemm<T>(trans_a, trans_b, alpha, V2<const T>(a.data() + i * a_r * a_c, a_r, a_c),
            V2<const T>(b.data() + i * b_r * b_c, b_r, b_c), beta, V2<T>(c.data() + i * c_r * c_c, c_r, c_c));
  }
}

}  // namespace strata::kernels
