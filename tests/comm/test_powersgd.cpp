// PowerSGD's pieces (comm/powersgd_across.hpp) on the host: which values of a block go as
// factors, the factors of a matrix of rank r reproduce it, P's columns come out
// orthonormal, and the error kept plus the node's share of what is sent is the value to one
// rounding per value.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "comm/powersgd_across.hpp"

using namespace strata;

TEST_CASE("PowerSGD plan: whole rows of the matrices that gain, the rest as floats", "[comm][powersgd]") {
  // a vector of 10 (no matrix), a 10 x 100 matrix, a 2 x 3 one (too small to gain at
  // r = 2), a 50 x 20 one; the block cuts the first matrix's row 1 and the last one's row 30
  const std::vector<MatrixSpan> matrices = {{10, 10, 100}, {1010, 2, 3}, {1016, 50, 20}};
  const LowRankPlan plan = plan_low_rank(matrices, 150, 1626, 2);
  REQUIRE(plan.pieces.size() == 2);
  CHECK(plan.pieces[0].offset == 210 - 150);  // rows 2-9 of the first (row 1 is cut)
  CHECK(plan.pieces[0].rows == 8);
  CHECK(plan.pieces[0].cols == 100);
  CHECK(plan.pieces[1].offset == 1016 - 150);  // rows 0-29 of the last
  CHECK(plan.pieces[1].rows == 30);
  CHECK(plan.pieces[1].cols == 20);
  CHECK(plan.p_values == (8 + 30) * 2);
  CHECK(plan.q_values == (100 + 20) * 2);
  // the floats: the cut row, the small matrix, and 10 values of the last matrix's row 30
  CHECK(plan.rest_values == 60 + 6 + 10);
  REQUIRE(plan.rest.size() == 3);
  CHECK(plan.rest[1].first == 1010 - 150);
  CHECK(plan.rest[1].second == 1016 - 150);
  // every value once
  int64_t values = plan.rest_values;
  for (const auto& p : plan.pieces) values += p.rows * p.cols;
  CHECK(values == 1626 - 150);
  // no matrices: all floats
  CHECK(plan_low_rank({}, 0, 77, 4).rest_values == 77);
}

TEST_CASE("PowerSGD factors: a matrix of rank r comes back, P orthonormal, kept + share = x", "[comm][powersgd]") {
  const int64_t rows = 37, cols = 53;
  const int r = 3;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> u(size_t(rows * r)), v(size_t(cols * r)), m(size_t(rows * cols), 0.0f);
  for (auto& x : u) x = normal(rng);
  for (auto& x : v) x = normal(rng);
  for (int64_t a = 0; a < rows; ++a)
    for (int64_t b = 0; b < cols; ++b)
      for (int j = 0; j < r; ++j) m[size_t(a * cols + b)] += u[size_t(a * r + j)] * v[size_t(b * r + j)];
  std::vector<float> q(size_t(cols * r)), p(size_t(rows * r));
  for (auto& x : q) x = normal(rng);
  low_rank_project(m.data(), rows, cols, q.data(), r, p.data());
  orthonormalize_columns(p.data(), rows, r);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < r; ++j) {
      double dot = 0;
      for (int64_t a = 0; a < rows; ++a) dot += double(p[size_t(a * r + i)]) * double(p[size_t(a * r + j)]);
      CHECK(dot == Approx(i == j ? 1.0 : 0.0).margin(1e-6));
    }
  low_rank_back(m.data(), rows, cols, p.data(), r, q.data());
  std::vector<float> out(m.size()), kept(m.size());
  const int nodes = 3;
  low_rank_expand(m.data(), rows, cols, p.data(), q.data(), r, nodes, out.data(), kept.data());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    worst = std::max(worst, std::abs(double(out[i]) - double(m[i])));
    scale = std::max(scale, std::abs(double(m[i])));
    // kept is x - out / nodes rounded once: adding the share back gives x within half an ulp of kept
    const double share = double(out[i] * (1.0f / float(nodes))), back = double(kept[i]) + share;
    CHECK(std::abs(back - double(m[i])) <= 0.5 * std::abs(std::nextafter(kept[i], INFINITY) - kept[i]));
  }
  CHECK(worst < 1e-5 * scale);  // rank r: the factors hold all of it
}

TEST_CASE("PowerSGD orthonormalize: a zero column or one in the others' span becomes zero", "[comm][powersgd]") {
  const int64_t rows = 5;
  const int r = 3;
  // column 0 = (1, 2, 0, 0, 0), column 1 = 2 x column 0, column 2 = 0
  std::vector<float> p = {1, 2, 0, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  orthonormalize_columns(p.data(), rows, r);
  CHECK(p[0] == Approx(1 / std::sqrt(5.0)));
  CHECK(p[3] == Approx(2 / std::sqrt(5.0)));
  for (int64_t a = 0; a < rows; ++a) {
    CHECK(std::abs(p[size_t(a * r + 1)]) < 1e-6f);
    CHECK(p[size_t(a * r + 2)] == 0.0f);
    CHECK(std::isfinite(p[size_t(a * r + 1)]));
  }
}
