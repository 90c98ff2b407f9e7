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

#include "kernels/matmul.hpp"
#include "parallel/tp2d_linear.hpp"

TEST_CASE("2D linear layer: output, input, weight and bias gradients equal the serial layer", "[mpi][summa][tp2d]") {
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
  const int64_t R = 6 * 5, K = 12, N = 20;  // b = 6, s = 5 tokens; k = 12 in, n = 20 out
  const auto X = global_matrix(R, K, 11), W = global_matrix(K, N, 12), DY = global_matrix(R, N, 13);
  const auto Bias = test::random_vector<float>(N, 14);

  // serial reference
  auto sx = test::to_device(X), sw = test::to_device(W), sdy = test::to_device(DY), sb = test::to_device(Bias);
  Tensor1<float> sy("sy", R * N), sdx("sdx", R * K), sdw("sdw", K * N), sdb("sdb", N);
  kernels::matmul_forward<float>(test::mat(sy, R, N), test::mat(sx, R, K), test::mat(sw, K, N), sb);
  kernels::matmul_backward<float>(test::mat(sdx, R, K), test::mat(sdw, K, N), sdb, test::mat(sdy, R, N),
                                  test::mat(sx, R, K), test::mat(sw, K, N));
  const auto Y = test::to_host<float>(sy), DX = test::to_host<float>(sdx), DW = test::to_host<float>(sdw),
             DB = test::to_host<float>(sdb);

  // 2D: blocks of X, W, dY; bias block j
  auto x = block_of(X, R, K, q, i, j), w = block_of(W, K, N, q, i, j), dy = block_of(DY, R, N, q, i, j);
  std::vector<float> bias_j(Bias.begin() + j * (N / q), Bias.begin() + (j + 1) * (N / q));
  auto b = test::to_device(bias_j);
  Tensor1<float> y("y", (R / q) * (N / q)), dx("dx", (R / q) * (K / q)), dw("dw", (K / q) * (N / q)), db("db", N / q);
  linear2d_forward(g, test::mat(x, R / q, K / q), test::mat(w, K / q, N / q), b, test::mat(y, R / q, N / q));
  linear2d_backward(g, test::mat(dy, R / q, N / q), test::mat(x, R / q, K / q), test::mat(w, K / q, N / q),
                    test::mat(dx, R / q, K / q), test::mat(dw, K / q, N / q), db);

  const auto block_error = [&](const std::vector<float>& want, int64_t rows, int64_t cols, const Tensor1<float>& got) {
    const auto h = test::to_host<float>(got);
    const int64_t br = rows / q, bc = cols / q;
    double worst = 0;
    for (int64_t r = 0; r < br; ++r)
      for (int64_t c = 0; c < bc; ++c)
        worst = std::max(worst, std::abs(double(h[size_t(r * bc + c)]) - want[size_t((i * br + r) * cols + j * bc + c)]));
    return worst;
  };
  const double tol = 1e-5;  // float sums in another order; values are O(1)-O(10)
  CHECK(block_error(Y, R, N, y) < tol * 10);
  CHECK(block_error(DX, R, K, dx) < tol * 10);
  CHECK(block_error(DW, K, N, dw) < tol * 10);
  const auto hdb = test::to_host<float>(db);
  double bias_err = 0;
  for (int64_t c = 0; c < N / q; ++c) bias_err = std::max(bias_err, std::abs(double(hdb[size_t(c)]) - DB[size_t(j * (N / q) + c)]));
  CHECK(bias_err < tol * 10);
}

#include "kernels/layernorm.hpp"
#include "parallel/tp2d_layernorm.hpp"

TEST_CASE("2D layernorm: output and gradients equal the serial layernorm", "[mpi][summa][tp2d]") {
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
  const int64_t R = 6 * 5, C = 12;
  // an offset mean (+50) makes the naive E[x^2]-E[x]^2 lose digits; Chan's combination does not
  auto X = global_matrix(R, C, 21);
  for (auto& v : X) v += 50.0f;
  const auto DY = global_matrix(R, C, 22), Wt = test::random_vector<float>(C, 23), Bs = test::random_vector<float>(C, 24);

  auto sx = test::to_device(X), sdy = test::to_device(DY), sw = test::to_device(Wt), sb = test::to_device(Bs);
  Tensor1<float> sy("sy", R * C), smean("sm", R), srstd("sr", R), sdx("sdx", R * C), sdw("sdw", C), sdb("sdb", C);
  kernels::layernorm_forward<float>(test::mat(sy, R, C), smean, srstd, test::mat(sx, R, C), sw, sb);
  kernels::layernorm_backward<float>(test::mat(sdx, R, C), sdw, sdb, test::mat(sdy, R, C), test::mat(sx, R, C), sw,
                                     smean, srstd, false);
  const auto Y = test::to_host<float>(sy), DX = test::to_host<float>(sdx), DW = test::to_host<float>(sdw),
             DB = test::to_host<float>(sdb);

  auto x = block_of(X, R, C, q, i, j), dy = block_of(DY, R, C, q, i, j);
  const std::vector<float> wj(Wt.begin() + j * (C / q), Wt.begin() + (j + 1) * (C / q));
  const std::vector<float> bj(Bs.begin() + j * (C / q), Bs.begin() + (j + 1) * (C / q));
  auto w = test::to_device(wj), b = test::to_device(bj);
  Tensor1<float> y("y", (R / q) * (C / q)), mean("m", R / q), rstd("r", R / q), dx("dx", (R / q) * (C / q)),
      dw("dw", C / q), db("db", C / q);
  layernorm2d_forward(g, C, test::mat(y, R / q, C / q), mean, rstd, test::mat(x, R / q, C / q), w, b);
  layernorm2d_backward(g, C, test::mat(dx, R / q, C / q), dw, db, test::mat(dy, R / q, C / q),
                       test::mat(x, R / q, C / q), w, mean, rstd);

  const auto block_error = [&](const std::vector<float>& want, int64_t rows, int64_t cols, const Tensor1<float>& got) {
    const auto h = test::to_host<float>(got);
    const int64_t br = rows / q, bc = cols / q;
    double worst = 0;
    for (int64_t r = 0; r < br; ++r)
      for (int64_t c = 0; c < bc; ++c)
        worst = std::max(worst, std::abs(double(h[size_t(r * bc + c)]) - want[size_t((i * br + r) * cols + j * bc + c)]));
    return worst;
  };
  const auto vec_error = [&](const std::vector<float>& want, const Tensor1<float>& got) {
    const auto h = test::to_host<float>(got);
    double worst = 0;
    for (int64_t c = 0; c < C / q; ++c) worst = std::max(worst, std::abs(double(h[size_t(c)]) - want[size_t(j * (C / q) + c)]));
    return worst;
  };
  CHECK(block_error(Y, R, C, y) < 1e-4);
  CHECK(block_error(DX, R, C, dx) < 1e-4);
  CHECK(vec_error(DW, dw) < 1e-4);
  CHECK(vec_error(DB, db) < 1e-4);
}
