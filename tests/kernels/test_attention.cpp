// Causal softmax and multi-head causal attention: forward against plain loops, backward
// against central differences.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/attention.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("causal softmax forward normalises the past and zeroes the future; backward matches finite differences",
          "[kernels][softmax][gradcheck]") {
  const int n = 2, t = 5;
  const double scale = 0.7;
  auto s = random_vector<double>(n * t * t, 40), r = random_vector<double>(n * t * t, 41);
  auto forward = [&]() {
    auto d = to_device(s);
    kernels::softmax_causal_forward<double>(cube(d, n, t, t), scale);
    return to_host<double>(d);
  };
  auto p = forward();
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < t; ++i) {
      double z = 0;
      for (int j = 0; j <= i; ++j) z += std::exp(scale * s[(b * t + i) * t + j]);
      for (int j = 0; j < t; ++j) {
        const double want = j <= i ? std::exp(scale * s[(b * t + i) * t + j]) / z : 0.0;
        REQUIRE(p[(b * t + i) * t + j] == Approx(want).epsilon(1e-12).margin(1e-15));
      }
    }
  auto dp = to_device(p), dd = to_device(r);
  kernels::softmax_causal_backward<double>(cube(dd, n, t, t), cube(dp, n, t, t), scale);
  REQUIRE(max_rel_error(to_host<double>(dd), numeric_gradient(s, [&]() { return dot(forward(), r); })) < 1e-7);
}

// Plain-loop causal attention on packed qkv (B*T, 3C).
static std::vector<double> ref_attention(const std::vector<double>& qkv, int b, int t, int h, int hs) {
  const int c = h * hs;
  std::vector<double> out(size_t(b) * t * c, 0.0);
  for (int bb = 0; bb < b; ++bb)
    for (int hh = 0; hh < h; ++hh)
      for (int i = 0; i < t; ++i) {
        std::vector<double> w(i + 1);
        double mx = -1e300, z = 0;
        for (int j = 0; j <= i; ++j) {
          double sdot = 0;
          for (int d = 0; d < hs; ++d)
            sdot += qkv[(bb * t + i) * 3 * c + hh * hs + d] * qkv[(bb * t + j) * 3 * c + c + hh * hs + d];
          w[j] = sdot / std::sqrt(double(hs));
          mx = std::max(mx, w[j]);
        }
        for (int j = 0; j <= i; ++j) z += (w[j] = std::exp(w[j] - mx));
        for (int j = 0; j <= i; ++j)
          for (int d = 0; d < hs; ++d)
            out[(bb * t + i) * c + hh * hs + d] += w[j] / z * qkv[(bb * t + j) * 3 * c + 2 * c + hh * hs + d];
      }
  return out;
}

TEST_CASE("attention forward matches plain loops and its backward matches finite differences",
          "[kernels][attention][gradcheck]") {
  const int b = 2, t = 4, h = 3, hs = 2, c = h * hs;
  auto qkv = random_vector<double>(b * t * 3 * c, 42), r = random_vector<double>(b * t * c, 43);
  auto forward = [&]() {
    auto d = to_device(qkv);
    kernels::AttentionBuffers<double> buf(b, t, h, hs);
    Tensor1<double> y("y", b * t * c);
    kernels::attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
    return to_host<double>(y);
  };
  REQUIRE(max_rel_error(forward(), ref_attention(qkv, b, t, h, hs)) < 1e-12);

  auto d = to_device(qkv), dr = to_device(r);
  kernels::AttentionBuffers<double> buf(b, t, h, hs);
  Tensor1<double> y("y", b * t * c), g("g", b * t * 3 * c);
  kernels::attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
  kernels::attention_backward<double>(mat(g, b * t, 3 * c), buf, mat(dr, b * t, c), b, t, h);
  REQUIRE(max_rel_error(to_host<double>(g), numeric_gradient(qkv, [&]() { return dot(forward(), r); })) < 1e-7);
}

TEST_CASE("causal products in row blocks match the full products and read nothing right of a block",
          "[kernels][attention]") {
  const int n = 2, t = 10, hs = 3, block = 4;  // blocks of 4, 4 and 2 rows
  auto x = random_vector<double>(n * t * hs, 44), y = random_vector<double>(n * t * hs, 45);
  // p: lower triangular; zero above the diagonal inside a row's block, NaN right of it
  auto p = random_vector<double>(n * t * t, 46);
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < t; ++i)
      for (int j = i + 1; j < t; ++j) p[(b * t + i) * t + j] = j < (i / block + 1) * block ? 0.0 : std::nan("");
  const auto at = [&](const std::vector<double>& v, int b, int i, int j, int cols) { return v[(b * t + i) * cols + j]; };

  auto dx = to_device(x), dy = to_device(y), dp = to_device(p);
  Tensor1<double> s("s", n * t * t), z("z", n * t * hs), zt("zt", n * t * hs);
  kernels::causal_scores<double>(2.0, cube(dx, n, t, hs), cube(dy, n, t, hs), cube(s, n, t, t), block);
  kernels::causal_times<double>(cube(dp, n, t, t), cube(dy, n, t, hs), cube(z, n, t, hs), block);
  kernels::causal_transposed_times<double>(cube(dp, n, t, t), cube(dy, n, t, hs), cube(zt, n, t, hs), block);
  const auto hs_ = to_host<double>(s), hz = to_host<double>(z), hzt = to_host<double>(zt);
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j < std::min(t, (i / block + 1) * block); ++j) {  // the scores up to the block's end
        double want = 0;
        for (int d = 0; d < hs; ++d) want += 2.0 * at(x, b, i, d, hs) * at(y, b, j, d, hs);
        REQUIRE(at(hs_, b, i, j, t) == Approx(want).epsilon(1e-12));
      }
      for (int d = 0; d < hs; ++d) {
        double want = 0, want_t = 0;  // p y and p^T y with p's upper triangle taken as zero
        for (int j = 0; j <= i; ++j) want += at(p, b, i, j, t) * at(y, b, j, d, hs);
        for (int j = i; j < t; ++j) want_t += at(p, b, j, i, t) * at(y, b, j, d, hs);
        REQUIRE(at(hz, b, i, d, hs) == Approx(want).epsilon(1e-12));
        REQUIRE(at(hzt, b, i, d, hs) == Approx(want_t).epsilon(1e-12));
      }
    }
}

TEST_CASE("attention over more than one row block matches plain loops and finite differences",
          "[kernels][attention][gradcheck]") {
  const int b = 1, t = 70, h = 2, hs = 2, c = h * hs;  // blocks of 64 and 6 rows
  REQUIRE(kernels::causal_block_rows(t) < t);
  auto qkv = random_vector<double>(b * t * 3 * c, 47), r = random_vector<double>(b * t * c, 48);
  kernels::AttentionBuffers<double> buf(b, t, h, hs);
  auto forward = [&]() {
    auto d = to_device(qkv);
    Tensor1<double> y("y", b * t * c);
    kernels::attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
    return to_host<double>(y);
  };
  REQUIRE(max_rel_error(forward(), ref_attention(qkv, b, t, h, hs)) < 1e-12);
  auto d = to_device(qkv), dr = to_device(r);
  Tensor1<double> y("y", b * t * c), g("g", b * t * 3 * c);
  kernels::attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
  kernels::attention_backward<double>(mat(g, b * t, 3 * c), buf, mat(dr, b * t, c), b, t, h);
  REQUIRE(max_rel_error(to_host<double>(g), numeric_gradient(qkv, [&]() { return dot(forward(), r); })) < 1e-7);
}
