// Causal attention. The fused kernel (kernels/attention.hpp): forward and logsumexp against
// plain loops, backward against central differences, on tilings that cut T into many
// uneven blocks; against the stored-probabilities reference (kernels/attention_reference.hpp)
// in fp32 at T not a multiple of the blocks; T = 1, scores of 1e4 (no overflow), a NaN
// input (it reaches the output). The reference itself: causal softmax and attention
// against plain loops and central differences. tests/kernels/check_attention_torch.py
// holds both precisions against PyTorch.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/attention_reference.hpp"
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

// Plain-loop causal attention on packed qkv (B*T, 3C); lse (B*H, T), if given, gets each
// row's logsumexp of its scaled scores.
static std::vector<double> ref_attention(const std::vector<double>& qkv, int b, int t, int h, int hs,
                                         std::vector<double>* lse = nullptr) {
  const int c = h * hs;
  std::vector<double> out(size_t(b) * t * c, 0.0);
  if (lse) lse->assign(size_t(b) * h * t, 0.0);
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
        if (lse) (*lse)[(bb * h + hh) * t + i] = mx + std::log(z);
        for (int j = 0; j <= i; ++j)
          for (int d = 0; d < hs; ++d)
            out[(bb * t + i) * c + hh * hs + d] += w[j] / z * qkv[(bb * t + j) * 3 * c + 2 * c + hh * hs + d];
      }
  return out;
}

TEST_CASE("reference attention forward matches plain loops and its backward matches finite differences",
          "[kernels][attention][gradcheck]") {
  const int b = 2, t = 4, h = 3, hs = 2, c = h * hs;
  auto qkv = random_vector<double>(b * t * 3 * c, 42), r = random_vector<double>(b * t * c, 43);
  auto forward = [&]() {
    auto d = to_device(qkv);
    kernels::AttentionBuffers<double> buf(b, t, h);
    Tensor1<double> y("y", b * t * c);
    kernels::reference_attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
    return to_host<double>(y);
  };
  REQUIRE(max_rel_error(forward(), ref_attention(qkv, b, t, h, hs)) < 1e-12);

  auto d = to_device(qkv), dr = to_device(r);
  kernels::AttentionBuffers<double> buf(b, t, h);
  Tensor1<double> y("y", b * t * c), g("g", b * t * 3 * c);
  kernels::reference_attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
  kernels::reference_attention_backward<double>(mat(g, b * t, 3 * c), buf, mat(d, b * t, 3 * c), mat(dr, b * t, c), b,
                                                t, h);
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
  const auto act = [&](const std::vector<double>& v, int bb, int hh, int i, int d) {
    return v[(bb * t + i) * w + hh * hs + d];
  };
  const auto score = [&](const std::vector<double>& v, int bb, int hh, int i, int j) {
    return v[((bb * h + hh) * t + i) * t + j];
  };

  auto dx = to_device(x), dy = to_device(y), dp = to_device(p);
  Tensor1<double> s("s", b * h * t * t), z("z", b * t * w), zt("zt", b * t * w);
  const auto heads = [&](const Tensor1<double>& a) { return kernels::head_columns<double>(a.data(), t, w, 0, hs); };
  const auto cheads = [&](const Tensor1<double>& a) {
    return kernels::head_columns<const double>(a.data(), t, w, 0, hs);
  };
  const auto scores = kernels::score_matrices<const double>(dp.data(), t, h);
  kernels::causal_scores<double>(Precision::FP32, cheads(dx), cheads(dy),
                                 kernels::score_matrices<double>(s.data(), t, h), b, h, t, hs, block);
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

TEST_CASE("reference attention over more than one row block matches plain loops and finite differences",
          "[kernels][attention][gradcheck]") {
  const int b = 1, t = 70, h = 2, hs = 2, c = h * hs;  // blocks of 64 and 6 rows
  REQUIRE(kernels::causal_block_rows(t) < t);
  auto qkv = random_vector<double>(b * t * 3 * c, 47), r = random_vector<double>(b * t * c, 48);
  kernels::AttentionBuffers<double> buf(b, t, h);
  auto forward = [&]() {
    auto d = to_device(qkv);
    Tensor1<double> y("y", b * t * c);
    kernels::reference_attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
    return to_host<double>(y);
  };
  REQUIRE(max_rel_error(forward(), ref_attention(qkv, b, t, h, hs)) < 1e-12);
  auto d = to_device(qkv), dr = to_device(r);
  Tensor1<double> y("y", b * t * c), g("g", b * t * 3 * c);
  kernels::reference_attention_forward<double>(mat(y, b * t, c), buf, mat(d, b * t, 3 * c), b, t, h);
  kernels::reference_attention_backward<double>(mat(g, b * t, 3 * c), buf, mat(d, b * t, 3 * c), mat(dr, b * t, c), b,
                                                t, h);
  REQUIRE(max_rel_error(to_host<double>(g), numeric_gradient(qkv, [&]() { return dot(forward(), r); })) < 1e-7);
}

namespace {

// The fused kernel on host vectors: out, lse, and (given dout) dqkv.
template <class T>
struct FusedRun {
  std::vector<double> out, lse, dqkv;
};
template <class T>
FusedRun<T> run_fused(const std::vector<T>& qkv, const std::vector<T>* dout, int b, int t, int h, int hs,
                      kernels::AttentionTiling tiling = {0, 0, 0}, Precision precision = Precision::FP32) {
  const int c = h * hs;
  auto d = to_device(qkv);
  Tensor1<T> y("y", size_t(b) * t * c), lse("lse", size_t(b) * h * t), g("g", size_t(b) * t * 3 * c);
  kernels::attention_forward<T>(mat(y, b * t, c), mat(lse, b * h, t), mat(d, b * t, 3 * c), b, t, h, precision, tiling);
  FusedRun<T> r;
  const auto widen = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  r.out = widen(to_host<T>(y));
  r.lse = widen(to_host<T>(lse));
  if (dout) {
    auto dd = to_device(*dout);
    kernels::attention_backward<T>(mat(g, b * t, 3 * c), mat(d, b * t, 3 * c), mat(y, b * t, c), mat(lse, b * h, t),
                                   mat(dd, b * t, c), b, t, h, precision, tiling);
    r.dqkv = widen(to_host<T>(g));
  }
  return r;
}

}  // namespace

TEST_CASE("fused attention matches plain loops and finite differences on uneven blocks",
          "[kernels][attention][gradcheck]") {
  // tilings that cut T = 11 into uneven query and key blocks (the last ones short; key
  // blocks that are not a multiple of the query blocks, or smaller), 1 to 3 heads per product
  const int b = 2, t = 11, h = 3, hs = 4, c = h * hs;
  auto qkv = random_vector<double>(b * t * 3 * c, 50), r = random_vector<double>(b * t * c, 51);
  std::vector<double> want_lse;
  const auto want = ref_attention(qkv, b, t, h, hs, &want_lse);
  for (const kernels::AttentionTiling tiling :
       {kernels::AttentionTiling{2, 4, 1}, {3, 6, 2}, {3, 4, 1}, {5, 2, 3}, {64, 256, 1}}) {
    CAPTURE(tiling.rows, tiling.keys, tiling.heads);
    const auto fused = run_fused<double>(qkv, &r, b, t, h, hs, tiling);
    REQUIRE(max_rel_error(fused.out, want) < 1e-12);
    REQUIRE(max_rel_error(fused.lse, want_lse) < 1e-12);
    const auto numeric =
        numeric_gradient(qkv, [&]() { return dot(run_fused<double>(qkv, nullptr, b, t, h, hs, tiling).out, r); });
    REQUIRE(max_rel_error(fused.dqkv, numeric) < 1e-7);
  }
}

TEST_CASE("fused attention in fp32 matches the stored-probabilities path to 1e-5", "[kernels][attention]") {
  struct Shape {
    int b, t, h, hs;
  };
  for (const Shape s :
       {Shape{1, 1, 1, 16}, {2, 7, 3, 16}, {1, 64, 8, 32}, {2, 129, 3, 64}, {1, 1000, 1, 128}, {1, 2048, 8, 64}}) {
    CAPTURE(s.b, s.t, s.h, s.hs);
    const int c = s.h * s.hs, n = s.b * s.t;
    const auto qkv = random_vector<float>(size_t(n) * 3 * c, 52), r = random_vector<float>(size_t(n) * c, 53);
    const auto fused = run_fused<float>(qkv, &r, s.b, s.t, s.h, s.hs);
    auto d = to_device(qkv), dr = to_device(r);
    kernels::AttentionBuffers<float> buf(s.b, s.t, s.h);
    Tensor1<float> y("y", size_t(n) * c), g("g", size_t(n) * 3 * c);
    kernels::reference_attention_forward<float>(mat(y, n, c), buf, mat(d, n, 3 * c), s.b, s.t, s.h);
    kernels::reference_attention_backward<float>(mat(g, n, 3 * c), buf, mat(d, n, 3 * c), mat(dr, n, c), s.b, s.t, s.h);
    const auto widen = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    REQUIRE(max_rel_error(fused.out, widen(to_host<float>(y))) < 1e-5);
    REQUIRE(max_rel_error(fused.dqkv, widen(to_host<float>(g))) < 1e-5);
  }
}

TEST_CASE("fused attention with scores of 1e4 neither overflows nor loses the largest score", "[kernels][attention]") {
  // q and k scaled by 100: scores up to ~1e4 / sqrt(hs); a naive exp would overflow
  const int b = 1, t = 300, h = 2, hs = 16, c = h * hs;
  auto qkv = random_vector<double>(b * t * 3 * c, 54);
  for (int i = 0; i < b * t; ++i)
    for (int j = 0; j < 2 * c; ++j) qkv[size_t(i) * 3 * c + j] *= 100.0;
  std::vector<double> want_lse;
  const auto want = ref_attention(qkv, b, t, h, hs, &want_lse);
  const std::vector<float> qkv32(qkv.begin(), qkv.end());
  const auto fused = run_fused<float>(qkv32, nullptr, b, t, h, hs);
  for (double x : fused.out) REQUIRE(std::isfinite(x));
  REQUIRE(max_rel_error(fused.out, want) < 1e-3);  // fp32 rounding of scores ~1e3 moves the weights
  for (size_t i = 0; i < want_lse.size(); ++i) REQUIRE(fused.lse[i] == Approx(want_lse[i]).epsilon(1e-5));
}

TEST_CASE("fused attention at T = 1 is V, and a NaN input reaches the output of the rows that see it",
          "[kernels][attention]") {
  const int b = 2, h = 3, hs = 8, c = h * hs;
  {
    const int t = 1;
    const auto qkv = random_vector<double>(b * t * 3 * c, 55), r = random_vector<double>(b * t * c, 56);
    const auto fused = run_fused<double>(qkv, &r, b, t, h, hs);
    for (int bb = 0; bb < b; ++bb)
      for (int j = 0; j < c; ++j) {
        REQUIRE(fused.out[bb * c + j] == Approx(qkv[bb * 3 * c + 2 * c + j]).epsilon(1e-14));
        REQUIRE(fused.dqkv[bb * 3 * c + j] == Approx(0.0).margin(1e-14));      // dQ: one key, softmax constant
        REQUIRE(fused.dqkv[bb * 3 * c + c + j] == Approx(0.0).margin(1e-14));  // dK
        REQUIRE(fused.dqkv[bb * 3 * c + 2 * c + j] == r[bb * c + j]);          // dV = dO
      }
  }
  const int t = 100;
  auto qkv = random_vector<float>(b * t * 3 * c, 57);
  const int bad_row = 40;
  qkv[size_t(bad_row) * 3 * c + c + 1] = std::nanf("");  // a key element of head 0, batch row 0
  const auto fused = run_fused<float>(qkv, nullptr, b, t, h, hs);
  const auto at = [&](int bb, int row, int col) { return fused.out[(size_t(bb) * t + row) * c + col]; };
  for (int row = 0; row < t; ++row)
    for (int col = 0; col < hs; ++col) {
      CAPTURE(row, col);
      if (row < bad_row)
        REQUIRE(std::isfinite(at(0, row, col)));  // the past of the NaN is untouched
      else
        REQUIRE(std::isnan(at(0, row, col)));
      REQUIRE(std::isfinite(at(0, row, hs + col)));  // other heads and batch rows too
      REQUIRE(std::isfinite(at(1, row, col)));
    }
}
