#pragma once
// General matrix products on row-major views. Every product in strata goes through
// here, so BLAS (OpenBLAS on CPUs via KokkosBlas, cuBLAS on GPUs) does the flops.
#include <KokkosBlas3_gemm.hpp>

#include "core/tensor.hpp"

namespace strata::kernels {

// C = alpha * op(A) * op(B) + beta * C, op = "N" or "T".
// A is (m,k) or (k,m), B is (k,n) or (n,k), C is (m,n).
template <class T>
void gemm(const char* trans_a, const char* trans_b, T alpha, V2<const T> a, V2<const T> b, T beta, V2<T> c) {
  KokkosBlas::gemm(trans_a, trans_b, alpha, a, b, beta, c);
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
