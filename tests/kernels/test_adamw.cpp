// AdamW update against a plain transcription of torch.optim.AdamW's formula.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/adamw.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("adamw matches the reference update over several steps", "[kernels][adamw]") {
  const int n = 9;
  auto p = random_vector<double>(n, 60);
  std::vector<double> m(n, 0.0), v(n, 0.0);
  auto dp = to_device(p), dm = to_device(m), dv = to_device(v);
  kernels::AdamWHyper h;
  h.lr = 3e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.eps = 1e-8;
  h.weight_decay = 0.1;
  for (int step = 1; step <= 5; ++step) {
    auto g = random_vector<double>(n, 100 + step);
    h.step = step;
    kernels::adamw_update<double>(dp, dm, dv, to_device(g), h);
    for (int i = 0; i < n; ++i) {
      p[i] *= 1 - h.lr * h.weight_decay;
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(h.beta1, step)), vhat = v[i] / (1 - std::pow(h.beta2, step));
      p[i] -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
    }
  }
  REQUIRE(max_rel_error(to_host<double>(dp), p) < 1e-12);
  REQUIRE(max_rel_error(to_host<double>(dm), m) < 1e-12);
  REQUIRE(max_rel_error(to_host<double>(dv), v) < 1e-12);
}

TEST_CASE("adamw's grad_scale is the clipped gradient, bit for bit", "[kernels][adamw]") {
  // the run clips by folding the factor into the update (optim/optimizer_step.cpp): it must
  // give the bits of scaling the gradient first, as clip_grad_norm does
  const int n = 4096 + 3;
  const float scale = 0.3718f;
  auto g = random_vector<float>(n, 81);
  std::vector<float> scaled(g);
  for (float& x : scaled) x *= scale;
  kernels::AdamWHyper h;
  h.lr = 1e-3;
  h.weight_decay = 0.1;
  auto p0 = random_vector<float>(n, 82);
  auto p_folded = to_device(p0), p_first = to_device(p0);
  std::vector<float> zeros(n, 0.0f);
  auto m_folded = to_device(zeros), v_folded = to_device(zeros), m_first = to_device(zeros), v_first = to_device(zeros);
  for (int step = 1; step <= 3; ++step) {
    h.step = step;
    h.grad_scale = scale;
    kernels::adamw_update<float>(p_folded, m_folded, v_folded, to_device(g), h);
    h.grad_scale = 1.0;
    kernels::adamw_update<float>(p_first, m_first, v_first, to_device(scaled), h);
  }
  REQUIRE(to_host<float>(p_folded) == to_host<float>(p_first));
  REQUIRE(to_host<float>(v_folded) == to_host<float>(v_first));
  REQUIRE(to_host<float>(p_folded) != p0);
}

#include "kernels/sum_squares.hpp"

TEST_CASE("sum_of_squares matches a plain sum", "[kernels][sum_squares]") {
  for (const int64_t n : {1, 15, 1001, 4096 * 3 + 17}) {  // within one chunk of 4096, and across chunks
    auto x = random_vector<double>(n, 70);
    double want = 0;
    for (double v : x) want += v * v;
    REQUIRE(kernels::sum_of_squares<double>(to_device(x)) == Approx(want).epsilon(1e-13));
    auto xf = random_vector<float>(n, 70);
    REQUIRE(kernels::sum_of_squares<float>(to_device(xf)) == Approx(want).epsilon(1e-5));
  }
}
