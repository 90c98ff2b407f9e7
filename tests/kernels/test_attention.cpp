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
