#pragma once
// A product C = op(A) op(B) cut along its inner dimension K into a few pieces, with other
// work run between them: the 3D layers progress their transfers there (tp3d_transfers).
// Each piece is whole slices of gemm's kSliceK, so gemm makes the same BLAS calls, slice
// by slice, whether the product is cut here or not, and the bits do not change (cutting
// rows instead would not do: OpenBLAS picks other kernels for smaller products). A K of
// one slice or less is not cut. tests/kernels/test_gemm.cpp checks every transpose.
#include <algorithm>

#include "kernels/gemm.hpp"

namespace strata::kernels {

#if !defined(KOKKOS_ENABLE_CUDA)
// C = op(A) op(B) in at most `pieces` pieces along K, between() after each.
template <class T, class Between>
void gemm_in_k_pieces(char ta, char tb, V2<const T> a, V2<const T> b, V2<T> c, int64_t pieces, Between between) {
  const bool ta_t = ta == 'T', tb_t = tb == 'T';
  const int64_t m = c.extent(0), n = c.extent(1), k = ta_t ? a.extent(0) : a.extent(1);
  const int64_t slice = detail::kSliceK;
  const int64_t slices = std::max<int64_t>(1, (k + slice - 1) / slice);
  const int64_t step = std::max<int64_t>(1, (slices + pieces - 1) / pieces) * slice;
  const int lda = int(a.extent(1)), ldb = int(b.extent(1)), ldc = int(c.extent(1));
  for (int64_t k0 = 0; k0 < std::max<int64_t>(k, 1); k0 += step) {
    const int64_t kk = std::min(step, k - k0);
    // op(A) (m x k): columns k0.. of A, or rows k0.. of a transposed A; op(B) likewise
    const T* a0 = ta_t ? a.data() + k0 * lda : a.data() + k0;
    const T* b0 = tb_t ? b.data() + k0 : b.data() + k0 * ldb;
    if (m > 0 && n > 0)
      detail::gemm_rowmajor<T>(ta, tb, int(m), int(n), int(kk), T(1), a0, lda, b0, ldb, k0 == 0 ? T(0) : T(1), c.data(),
                               ldc);
    between();
  }
}
#endif

}  // namespace strata::kernels
