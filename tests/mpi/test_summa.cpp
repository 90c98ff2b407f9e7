// SUMMA products (AB, ABT, ATB) on the job's square tensor grid against one gemm of the
// gathered global matrices, with non-square, distinct sizes. On 4 ranks this is q = 2;
// on 1 or 2 ranks q = 1 (the 2D code path on one rank), which must equal gemm exactly.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "comm/grid.hpp"
#include "kernels/gemm.hpp"
#include "parallel/summa.hpp"
#include "support/host_views.hpp"

using namespace strata;

namespace {

// Global (rows x cols) matrix from the counter RNG: the same on every rank.
std::vector<float> global_matrix(int64_t rows, int64_t cols, uint64_t stream) {
  return test::random_vector<float>(size_t(rows * cols), stream);
}

// Block (bi, bj) of a global row-major matrix cut into q x q blocks.
Tensor1<float> block_of(const std::vector<float>& g, int64_t rows, int64_t cols, int q, int bi, int bj) {
  const int64_t br = rows / q, bc = cols / q;
  std::vector<float> b(size_t(br * bc));
  for (int64_t r = 0; r < br; ++r)
    for (int64_t c = 0; c < bc; ++c) b[size_t(r * bc + c)] = g[size_t((bi * br + r) * cols + bj * bc + c)];
  return test::to_device(b);
}

std::vector<float> serial(const char* ta, const char* tb, const std::vector<float>& a, int64_t ar, int64_t ac,
                          const std::vector<float>& b, int64_t br, int64_t bc, int64_t m, int64_t n) {
  auto da = test::to_device(a), db = test::to_device(b);
  Tensor1<float> c("c", m * n);
  kernels::gemm<float>(ta, tb, 1.0f, test::mat(da, ar, ac), test::mat(db, br, bc), 0.0f, test::mat(c, m, n));
  return test::to_host<float>(c);
}

}  // namespace

TEST_CASE("SUMMA AB, ABT and ATB equal the serial products", "[mpi][summa]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int q = world == 4 ? 2 : 1;
  ParallelConfig cfg;
  cfg.data = world / (q * q);
  cfg.tensor_rows = cfg.tensor_cols = q;
  cfg.tensor_mode = "2d";
  Grid grid(cfg, MPI_COMM_WORLD);
  Comm row(grid.tensor_row()), col(grid.tensor_col());
  const TensorGrid2D g{row, col, q, grid.coords().row, grid.coords().col};
  const int i = g.i, j = g.j;
  // non-square, distinct sizes (Optimus' test shape: b*s = 6*5 rows would need q | 30)
  const int64_t M = 6, K = 12, N = 20;
  const double tol = q == 1 ? 0.0 : 1e-5;  // q = 1 is the same gemm call: bit-identical

  const auto check_block = [&](const std::vector<float>& want, int64_t rows, int64_t cols, const Tensor1<float>& got) {
    const auto h = test::to_host<float>(got);
    const int64_t br = rows / q, bc = cols / q;
    double worst = 0, scale = 1e-30;
    for (int64_t r = 0; r < br; ++r)
      for (int64_t c = 0; c < bc; ++c) {
        const double w = want[size_t((i * br + r) * cols + j * bc + c)];
        worst = std::max(worst, std::abs(double(h[size_t(r * bc + c)]) - w));
        scale = std::max(scale, std::abs(w));
      }
    return worst / std::max(scale, 1.0);
  };

  {  // AB: A (M, K), B (K, N)
    const auto A = global_matrix(M, K, 1), B = global_matrix(K, N, 2);
    auto a = block_of(A, M, K, q, i, j), b = block_of(B, K, N, q, i, j);
    Tensor1<float> c("c", (M / q) * (N / q));
    summa_matmul_ab(g, test::mat(a, M / q, K / q), test::mat(b, K / q, N / q), test::mat(c, M / q, N / q));
    CHECK(check_block(serial("N", "N", A, M, K, B, K, N, M, N), M, N, c) <= tol);
  }
  {  // ABT: A (M, K), B (N, K) -> (M, N)
    const auto A = global_matrix(M, K, 3), B = global_matrix(N, K, 4);
    auto a = block_of(A, M, K, q, i, j), b = block_of(B, N, K, q, i, j);
    Tensor1<float> c("c", (M / q) * (N / q));
    summa_matmul_abt(g, test::mat(a, M / q, K / q), test::mat(b, N / q, K / q), test::mat(c, M / q, N / q));
    CHECK(check_block(serial("N", "T", A, M, K, B, N, K, M, N), M, N, c) <= tol);
  }
  {  // ATB: A (K, M), B (K, N) -> (M, N)
    const auto A = global_matrix(K, M, 5), B = global_matrix(K, N, 6);
    auto a = block_of(A, K, M, q, i, j), b = block_of(B, K, N, q, i, j);
    Tensor1<float> c("c", (M / q) * (N / q));
    summa_matmul_atb(g, test::mat(a, K / q, M / q), test::mat(b, K / q, N / q), test::mat(c, M / q, N / q));
    CHECK(check_block(serial("T", "N", A, K, M, B, K, N, M, N), M, N, c) <= tol);
  }
  // every block of A and B crossed the row/column once per step: bytes were counted
  if (q > 1) CHECK(row.stats().at("broadcast").bytes > 0);
}
