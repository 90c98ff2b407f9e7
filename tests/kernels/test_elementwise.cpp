// GELU and the residual add: forward against the formula, backward against central
// differences.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/gelu.hpp"
#include "kernels/residual.hpp"
#include "kernels/residual_tanh.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("gelu forward is the tanh approximation and its backward matches finite differences",
          "[kernels][gelu][gradcheck]") {
  const int n = 40;
  auto x = random_vector<double>(n, 30, 2.5), r = random_vector<double>(n, 31);
  auto forward = [&]() {
    auto dx = to_device(x);
    Tensor1<double> y("y", n);
    kernels::gelu_forward<double>(y, dx);
    return to_host<double>(y);
  };
  auto y = forward();
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    REQUIRE(y[i] == Approx(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))).epsilon(1e-12));
  }
  auto dx = to_device(x), dr = to_device(r);
  Tensor1<double> g("g", n);
  kernels::gelu_backward<double>(g, dx, dr);
  REQUIRE(max_rel_error(to_host<double>(g), numeric_gradient(x, [&]() { return dot(forward(), r); })) < 1e-7);
}

TEST_CASE("residual forward adds and its backward accumulates into both branches", "[kernels][residual][gradcheck]") {
  const int n = 17;
  auto a = random_vector<double>(n, 32), b = random_vector<double>(n, 33), r = random_vector<double>(n, 34);
  auto forward = [&]() {
    auto da = to_device(a), db = to_device(b);
    Tensor1<double> y("y", n);
    kernels::residual_forward<double>(y, da, db);
    return to_host<double>(y);
  };
  auto y = forward();
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == a[i] + b[i]);
  auto loss = [&]() { return dot(forward(), r); };
  auto dr = to_device(r);
  Tensor1<double> ga("ga", n), gb("gb", n);
  kernels::residual_accumulate<double>(ga, dr);
  kernels::residual_accumulate<double>(gb, dr);
  REQUIRE(max_rel_error(to_host<double>(ga), numeric_gradient(a, loss)) < 1e-8);
  REQUIRE(max_rel_error(to_host<double>(gb), numeric_gradient(b, loss)) < 1e-8);
}

#include <limits>

#include "kernels/fast_exp.hpp"

TEST_CASE("fast_exp<float> is within 3e-7 relative of exp over the float range", "[kernels][fast_exp]") {
  const int n = 200001;
  Tensor1<float> y("y", n);
  Kokkos::parallel_for(
      "fast_exp_test", Range(0, n),
      KOKKOS_LAMBDA(const int64_t i) { y(i) = kernels::fast_exp<float>(-87.0f + 175.0f * float(i) / float(n - 1)); });
  const auto h = to_host<float>(y);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const double x = double(-87.0f + 175.0f * float(i) / float(n - 1));
    worst = std::max(worst, std::abs(double(h[i]) - std::exp(x)) / std::exp(x));
  }
  REQUIRE(worst < 3e-7);
  REQUIRE(kernels::fast_exp<float>(-1000.0f) >= 0.0f);
  REQUIRE(kernels::fast_exp<float>(-1000.0f) < 1e-37f);
  REQUIRE(std::isfinite(kernels::fast_exp<float>(1000.0f)));
  // the clamp works on the float's bits: huge, infinite and NaN arguments
  REQUIRE(kernels::fast_exp<float>(-1e30f) < 1e-37f);
  REQUIRE(kernels::fast_exp<float>(-std::numeric_limits<float>::infinity()) < 1e-37f);
  REQUIRE(kernels::fast_exp<float>(1e30f) > 1e38f);
  REQUIRE(kernels::fast_exp<float>(std::numeric_limits<float>::infinity()) > 1e38f);
  REQUIRE(std::isnan(kernels::fast_exp<float>(std::numeric_limits<float>::quiet_NaN())));
  REQUIRE(kernels::fast_exp<float>(0.0f) == 1.0f);
  REQUIRE(kernels::fast_exp<double>(1.5) == std::exp(1.5));
}

#include "kernels/lanes.hpp"

TEST_CASE("lane_sum and lane_max equal the sequential sum and maximum, tails included", "[kernels][lanes]") {
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<float> x(n);
    for (int64_t j = 0; j < n; ++j) x[j] = float(std::sin(0.7 * double(j * j + n))) * 3.0f - 1.0f;
    double sum = 0;
    float mx = x[0];
    for (float v : x) sum += v, mx = std::max(mx, v);
    // on the host, as a kernel's lanes would run (lambdas callable on both sides)
    const float* xs = x.data();
    REQUIRE(kernels::lane_sum<float>(
                n, KOKKOS_LAMBDA(int64_t j) { return xs[j]; }) == Approx(sum).margin(1e-5));
    REQUIRE(kernels::lane_sum<double>(
                n, KOKKOS_LAMBDA(int64_t j) { return double(xs[j]); }) == Approx(sum).epsilon(1e-14));
    REQUIRE(kernels::lane_max<float>(
                n, KOKKOS_LAMBDA(int64_t j) { return xs[j]; }) == mx);
    REQUIRE(kernels::lane_max<double>(
                n, KOKKOS_LAMBDA(int64_t j) { return double(xs[j]); }) == double(mx));
  }
  // all negative (the integer order of negative floats is the flipped one), signed zeros, NaN
  const std::vector<float> neg = {-3.5f, -0.25f, -7.0f, -1e30f, -0.5f};
  const float* ns = neg.data();
  REQUIRE(kernels::lane_max<float>(
              5, KOKKOS_LAMBDA(int64_t j) { return ns[j]; }) == -0.25f);
  const std::vector<float> zeros = {-0.0f, 0.0f, -0.0f};
  const float* zs = zeros.data();
  REQUIRE(!std::signbit(kernels::lane_max<float>(
      3, KOKKOS_LAMBDA(int64_t j) { return zs[j]; })));
  std::vector<float> with_nan(40, 1.0f);
  with_nan[33] = std::numeric_limits<float>::quiet_NaN();
  const float* ws = with_nan.data();
  REQUIRE(std::isnan(kernels::lane_max<float>(
      40, KOKKOS_LAMBDA(int64_t j) { return ws[j]; })));
}

TEST_CASE("fast_tanh: exact to rounding in double, a few 1e-7 in float", "[kernels][fast_tanh]") {
  double worst_d = 0, worst_f = 0;
  for (int i = -4000; i <= 4000; ++i) {
    const double x = i * 0.005 + 1e-4 * (i % 7);  // [-20, 20], across the polynomial's edge
    const double t = std::tanh(x);
    worst_d = std::max(worst_d, std::abs(kernels::fast_tanh<double>(x) - t) / std::max(std::abs(t), 1e-300));
    worst_f = std::max(worst_f, std::abs(double(kernels::fast_tanh<float>(float(x))) - std::tanh(double(float(x)))) /
                                    std::max(std::abs(t), 1e-30));
  }
  CHECK(worst_d < 1e-10);
  CHECK(worst_f < 2e-6);
  CHECK(kernels::fast_tanh<double>(0.0) == 0.0);
}
