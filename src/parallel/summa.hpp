#pragma once
// SUMMA matrix products on a q x q tensor grid (Optimus, arXiv 2104.05343), the building
// block of 2D tensor parallelism. Rank (i, j) holds block (i, j) of every operand, all
// blocks of an operand having the same shape. Each of the q steps broadcasts one block
// along grid rows and/or columns; the broadcasts of step t+1 are posted before the local
// gemm of step t (double buffering), so communication overlaps computation. Products:
//   AB : C_ij  = sum_t A_it B_tj        (forward of a linear layer)
//   ABT: C_it  = sum_j A_ij B_tj^T      (input gradient: dX = dY W^T)
//   ATB: C_tj  = sum_i A_it^T B_ij      (weight gradient: dW = X^T dY)
// Buffers may be device memory: blocks are staged through host mirrors for MPI (a no-op
// where the host can read the memory).
#include "comm/comm.hpp"
#include "core/deck_choices.hpp"
#include "core/tensor.hpp"
#include "kernels/products.hpp"

namespace strata {

struct TensorGrid2D {
  Comm& row;  // ranks (i, 0..q-1), ordered by column
  Comm& col;  // ranks (0..q-1, j), ordered by row
  int q = 1, i = 0, j = 0;
};

// T is float or double. Each product overwrites c (outputs first, as in every parallel
// operator).
// a: block (m, k) of A; b: block (k, n) of B; c: block (m, n) of C = A B.
template <class T>
void summa_matmul_ab(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> c, V2<const T> a, V2<const T> b);
// a: block (m, k) of A; b: block (n, k) of B; c: block (m, n) of C = A B^T.
template <class T>
void summa_matmul_abt(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> c, V2<const T> a,
                      V2<const T> b);
// a: block (k, m) of A; b: block (k, n) of B; c: block (m, n) of C = A^T B.
template <class T>
void summa_matmul_atb(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> c, V2<const T> a,
                      V2<const T> b);

}  // namespace strata
