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
    kernels::AttentionBuffers<double> buf(b, t, h);
    Tensor1<double> y("y", b * t * c);
    kernels::attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
    return to_host<double>(y);
  };
  REQUIRE(max_rel_error(forward(), ref_attention(qkv, b, t, h, hs)) < 1e-12);

  auto d = to_device(qkv), dr = to_device(r);
  kernels::AttentionBuffers<double> buf(b, t, h);
  Tensor1<double> y("y", b * t * c), g("g", b * t * 3 * c);
  kernels::attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
  kernels::attention_backward<double>(mat(g, b * t, 3 * c), buf, mat(d, b * t, 3 * c), mat(dr, b * t, c), b, t, h);
  REQUIRE(max_rel_error(to_host<double>(g), numeric_gradient(qkv, [&]() { return dot(forward(), r); })) < 1e-7);
}

TEST_CASE("causal products in row blocks match the full products and read nothing right of a block",
          "[kernels][attention]") {
  // two batch rows of two heads; x and y are head column blocks of a (B*T, 2*hs) activation
  const int b = 2, h = 2, t = 10, hs = 3, w = h * hs, block = 4;  // row blocks of 4, 4 and 2
  auto x = random_vector<double>(b * t * w, 44), y = random_vector<double>(b * t * w, 45);
  // p (B*H, T, T): lower triangular; zero above the diagonal inside a row's block, NaN right of it
  auto p = random_vector<double>(b * h * t * t, 46);
  for (int m = 0; m < b * h; ++m)
    for (int i = 0; i < t; ++i)
      for (int j = i + 1; j < t; ++j) p[(m * t + i) * t + j] = j < (i / block + 1) * block ? 0.0 : std::nan("");
  // element (i, d) of head hh in batch row bb of an activation, and (i, j) of its score matrix
  const auto act = [&](const std::vector<double>& v, int bb, int hh, int i, int d) { return v[(bb * t + i) * w + hh * hs + d]; };
  const auto score = [&](const std::vector<double>& v, int bb, int hh, int i, int j) { return v[((bb * h + hh) * t + i) * t + j]; };

  auto dx = to_device(x), dy = to_device(y), dp = to_device(p);
  Tensor1<double> s("s", b * h * t * t), z("z", b * t * w), zt("zt", b * t * w);
  const auto heads = [&](const Tensor1<double>& a) { return kernels::head_columns<double>(a.data(), t, w, 0, hs); };
  const auto cheads = [&](const Tensor1<double>& a) { return kernels::head_columns<const double>(a.data(), t, w, 0, hs); };
  const auto scores = kernels::score_matrices<const double>(dp.data(), t, h);
  kernels::causal_scores<double>(Precision::FP32, cheads(dx), cheads(dy), kernels::score_matrices<double>(s.data(), t, h), b, h, t, hs, block);
  kernels::causal_times<double>(Precision::FP32, scores, cheads(dy), heads(z), b, h, t, hs, block);
  kernels::causal_transposed_times<double>(Precision::FP32, scores, cheads(dy), heads(zt), b, h, t, hs, block);
  const auto hs_ = to_host<double>(s), hz = to_host<double>(z), hzt = to_host<double>(zt);
  for (int bb = 0; bb < b; ++bb)
    for (int hh = 0; hh < h; ++hh)
      for (int i = 0; i < t; ++i) {
        for (int j = 0; j < std::min(t, (i / block + 1) * block); ++j) {  // the scores up to the block's end
          double want = 0;
          for (int d = 0; d < hs; ++d) want += act(x, bb, hh, i, d) * act(y, bb, hh, j, d);
          REQUIRE(score(hs_, bb, hh, i, j) == Approx(want).epsilon(1e-12));
        }
        for (int d = 0; d < hs; ++d) {
          double want = 0, want_t = 0;  // p y and p^T y with p's upper triangle taken as zero
          for (int j = 0; j <= i; ++j) want += score(p, bb, hh, i, j) * act(y, bb, hh, j, d);
          for (int j = i; j < t; ++j) want_t += score(p, bb, hh, j, i) * act(y, bb, hh, j, d);
          REQUIRE(act(hz, bb, hh, i, d) == Approx(want).epsilon(1e-12));
          REQUIRE(act(hzt, bb, hh, i, d) == Approx(want_t).epsilon(1e-12));
        }
      }
}

TEST_CASE("attention over more than one row block matches plain loops and finite differences",
          "[kernels][attention][gradcheck]") {
  const int b = 1, t = 70, h = 2, hs = 2, c = h * hs;  // blocks of 64 and 6 rows
  REQUIRE(kernels::causal_block_rows(t) < t);
  auto qkv = random_vector<double>(b * t * 3 * c, 47), r = random_vector<double>(b * t * c, 48);
  kernels::AttentionBuffers<double> buf(b, t, h);
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
  kernels::attention_backward<double>(mat(g, b * t, 3 * c), buf, mat(d, b * t, 3 * c), mat(dr, b * t, c), b, t, h);
  REQUIRE(max_rel_error(to_host<double>(g), numeric_gradient(qkv, [&]() { return dot(forward(), r); })) < 1e-7);
}
