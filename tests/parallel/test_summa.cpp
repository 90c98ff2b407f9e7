// The 2D (Optimus) operators on the job's square tensor grid against the serial kernels,
// with non-square, distinct sizes: SUMMA AB, ABT, ATB; the 2D linear layer; the 2D
// layernorm. On 4 ranks q = 2; on 1 or 2 ranks q = 1 (the 2D code path on one rank),
// where the products are the serial gemm bit for bit.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "comm/grid.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "parallel/summa.hpp"
#include "parallel/tp2d_layernorm.hpp"
#include "parallel/tp2d_linear.hpp"
#include "support/host_views.hpp"

using namespace strata;

namespace {

// The largest square tensor grid the job allows (2 x 2 on 4 ranks, else 1 x 1), with its
// row and column communicators.
struct SquareGrid {
  int q;
  Grid grid;
  TensorGrid2D g;
  static Layout layout(int q) {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    Layout cfg;
    cfg.data = world / (q * q);
    cfg.tensor_rows = cfg.tensor_cols = q;
    cfg.tensor_mode = TensorMode::TwoD;
    return cfg;
  }
  static int largest_q() {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    return world == 4 ? 2 : 1;
  }
  SquareGrid()
      : q(largest_q()), grid(layout(q), MPI_COMM_WORLD), g{grid.tensor_row(), grid.tensor_col(), q, grid.coords().row,
                                                           grid.coords().col} {}
};

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

// Block j of a vector cut into q parts.
Tensor1<float> part_of(const std::vector<float>& v, int q, int j) {
  const size_t n = v.size() / size_t(q);
  return test::to_device(std::vector<float>(v.begin() + j * n, v.begin() + (j + 1) * n));
}

// max |got - block (i, j) of want|: got is this rank's block of a global (rows x cols) matrix.
double block_error(const std::vector<float>& want, int64_t rows, int64_t cols, const Tensor1<float>& got, int q, int i,
                   int j) {
  const auto h = test::to_host<float>(got);
  const int64_t br = rows / q, bc = cols / q;
  double worst = 0;
  for (int64_t r = 0; r < br; ++r)
    for (int64_t c = 0; c < bc; ++c)
      worst = std::max(worst, std::abs(double(h[size_t(r * bc + c)]) - want[size_t((i * br + r) * cols + j * bc + c)]));
  return worst;
}

// max |got - part j of want|: got is this rank's part of a vector cut into q parts.
double part_error(const std::vector<float>& want, const Tensor1<float>& got, int q, int j) {
  const auto h = test::to_host<float>(got);
  const size_t n = want.size() / size_t(q);
  double worst = 0;
  for (size_t c = 0; c < n; ++c) worst = std::max(worst, std::abs(double(h[c]) - want[j * n + c]));
  return worst;
}

std::vector<float> serial_gemm(const char* ta, const char* tb, const std::vector<float>& a, int64_t ar, int64_t ac,
                               const std::vector<float>& b, int64_t br, int64_t bc, int64_t m, int64_t n) {
  auto da = test::to_device(a), db = test::to_device(b);
  Tensor1<float> c("c", m * n);
  kernels::gemm<float>(ta, tb, 1.0f, test::mat(da, ar, ac), test::mat(db, br, bc), 0.0f, test::mat(c, m, n));
  return test::to_host<float>(c);
}

}  // namespace

TEST_CASE("SUMMA AB, ABT and ATB equal the serial products", "[mpi][summa]") {
  SquareGrid s;
  const int q = s.q, i = s.g.i, j = s.g.j;
  const int64_t M = 6, K = 12, N = 20;
  const double tol = q == 1 ? 0.0 : 1e-4;  // q = 1 is the same gemm call: bit-identical
  Tensor1<float> c("c", (M / q) * (N / q));
  {  // AB: A (M, K), B (K, N)
    const auto A = global_matrix(M, K, 1), B = global_matrix(K, N, 2);
    auto a = block_of(A, M, K, q, i, j), b = block_of(B, K, N, q, i, j);
    summa_matmul_ab<float>(s.g, Precision::FP32, test::mat(c, M / q, N / q), test::mat(a, M / q, K / q),
                           test::mat(b, K / q, N / q));
    CHECK(block_error(serial_gemm("N", "N", A, M, K, B, K, N, M, N), M, N, c, q, i, j) <= tol);
  }
  {  // ABT: A (M, K), B (N, K) -> (M, N)
    const auto A = global_matrix(M, K, 3), B = global_matrix(N, K, 4);
    auto a = block_of(A, M, K, q, i, j), b = block_of(B, N, K, q, i, j);
    summa_matmul_abt<float>(s.g, Precision::FP32, test::mat(c, M / q, N / q), test::mat(a, M / q, K / q),
                            test::mat(b, N / q, K / q));
    CHECK(block_error(serial_gemm("N", "T", A, M, K, B, N, K, M, N), M, N, c, q, i, j) <= tol);
  }
  {  // ATB: A (K, M), B (K, N) -> (M, N)
    const auto A = global_matrix(K, M, 5), B = global_matrix(K, N, 6);
    auto a = block_of(A, K, M, q, i, j), b = block_of(B, K, N, q, i, j);
    summa_matmul_atb<float>(s.g, Precision::FP32, test::mat(c, M / q, N / q), test::mat(a, K / q, M / q),
                            test::mat(b, K / q, N / q));
    CHECK(block_error(serial_gemm("T", "N", A, K, M, B, K, N, M, N), M, N, c, q, i, j) <= tol);
  }
  if (q > 1) CHECK(s.grid.tensor_row().stats().at("broadcast").bytes > 0);  // Comm counted the traffic
}

TEST_CASE("2D linear layer: output, input, weight and bias gradients equal the serial layer", "[mpi][summa][tp2d]") {
  SquareGrid s;
  const int q = s.q, i = s.g.i, j = s.g.j;
  const int64_t R = 6 * 5, K = 12, N = 20;  // b = 6, s = 5 tokens; k = 12 in, n = 20 out
  const auto X = global_matrix(R, K, 11), W = global_matrix(K, N, 12), DY = global_matrix(R, N, 13);
  const auto Bias = test::random_vector<float>(N, 14);

  auto sx = test::to_device(X), sw = test::to_device(W), sdy = test::to_device(DY), sb = test::to_device(Bias);
  Tensor1<float> sy("sy", R * N), sdx("sdx", R * K), sdw("sdw", K * N), sdb("sdb", N);
  kernels::matmul_forward<float>(test::mat(sy, R, N), test::mat(sx, R, K), test::mat(sw, K, N), sb);
  kernels::matmul_backward<float>(test::mat(sdx, R, K), test::mat(sdw, K, N), sdb, test::mat(sdy, R, N),
                                  test::mat(sx, R, K), test::mat(sw, K, N));

  auto x = block_of(X, R, K, q, i, j), w = block_of(W, K, N, q, i, j), dy = block_of(DY, R, N, q, i, j);
  auto b = part_of(Bias, q, j);
  Tensor1<float> y("y", (R / q) * (N / q)), dx("dx", (R / q) * (K / q)), dw("dw", (K / q) * (N / q)), db("db", N / q);
  linear2d_forward<float>(s.g, Precision::FP32, test::mat(y, R / q, N / q), test::mat(x, R / q, K / q),
                          test::mat(w, K / q, N / q), b);
  linear2d_backward<float>(s.g, Precision::FP32, test::mat(dx, R / q, K / q), test::mat(dw, K / q, N / q), db,
                           test::mat(dy, R / q, N / q), test::mat(x, R / q, K / q), test::mat(w, K / q, N / q));

  const double tol = 1e-4;  // float sums in another order; values are O(1)-O(10)
  CHECK(block_error(test::to_host<float>(sy), R, N, y, q, i, j) < tol);
  CHECK(block_error(test::to_host<float>(sdx), R, K, dx, q, i, j) < tol);
  CHECK(block_error(test::to_host<float>(sdw), K, N, dw, q, i, j) < tol);
  CHECK(part_error(test::to_host<float>(sdb), db, q, j) < tol);
}

TEST_CASE("2D layernorm: output and gradients equal the serial layernorm", "[mpi][summa][tp2d]") {
  SquareGrid s;
  const int q = s.q, i = s.g.i, j = s.g.j;
  const int64_t R = 6 * 5, C = 12;
  // an offset mean (+50) makes the naive E[x^2]-E[x]^2 lose digits; Chan's combination does not
  auto X = global_matrix(R, C, 21);
  for (auto& v : X) v += 50.0f;
  const auto DY = global_matrix(R, C, 22), Wt = test::random_vector<float>(C, 23),
             Bs = test::random_vector<float>(C, 24);

  auto sx = test::to_device(X), sdy = test::to_device(DY), sw = test::to_device(Wt), sb = test::to_device(Bs);
  Tensor1<float> sy("sy", R * C), smean("sm", R), srstd("sr", R), sdx("sdx", R * C), sdw("sdw", C), sdb("sdb", C);
  kernels::layernorm_forward<float>(test::mat(sy, R, C), smean, srstd, test::mat(sx, R, C), sw, sb);
  kernels::layernorm_backward<float>(test::mat(sdx, R, C), sdw, sdb, test::mat(sdy, R, C), test::mat(sx, R, C), sw,
                                     smean, srstd, false);

  auto x = block_of(X, R, C, q, i, j), dy = block_of(DY, R, C, q, i, j);
  auto w = part_of(Wt, q, j), b = part_of(Bs, q, j);
  Tensor1<float> y("y", (R / q) * (C / q)), mean("m", R / q), rstd("r", R / q), dx("dx", (R / q) * (C / q)),
      dw("dw", C / q), db("db", C / q);
  layernorm2d_forward<float>(s.g, C, test::mat(y, R / q, C / q), mean, rstd, test::mat(x, R / q, C / q), w, b);
  layernorm2d_backward<float>(s.g, C, test::mat(dx, R / q, C / q), dw, db, test::mat(dy, R / q, C / q),
                              test::mat(x, R / q, C / q), w, mean, rstd);

  CHECK(block_error(test::to_host<float>(sy), R, C, y, q, i, j) < 1e-4);
  CHECK(block_error(test::to_host<float>(sdx), R, C, dx, q, i, j) < 1e-4);
  CHECK(part_error(test::to_host<float>(sdw), dw, q, j) < 1e-4);
  CHECK(part_error(test::to_host<float>(sdb), db, q, j) < 1e-4);
}
