// layernorm forward against a plain loop; backward against central differences.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/layernorm.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("layernorm forward matches the definition", "[kernels][layernorm]") {
  const int n = 5, c = 8;
  auto x = random_vector<double>(n * c, 20, 3.0), w = random_vector<double>(c, 21), b = random_vector<double>(c, 22);
  auto dx = to_device(x), dw = to_device(w), db = to_device(b);
  Tensor1<double> y("y", n * c), mean("m", n), rstd("r", n);
  kernels::layernorm_forward<double>(mat(y, n, c), mean, rstd, mat(dx, n, c), dw, db);
  auto yh = to_host<double>(y);
  for (int i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int j = 0; j < c; ++j) m += x[i * c + j] / c;
    for (int j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m) / c;
    for (int j = 0; j < c; ++j)
      REQUIRE(yh[i * c + j] == Approx((x[i * c + j] - m) / std::sqrt(v + 1e-5) * w[j] + b[j]).epsilon(1e-12));
  }
}

TEST_CASE("layernorm backward matches finite differences, writing or accumulating dinp",
          "[kernels][layernorm][gradcheck]") {
  const int n = 4, c = 6;
  auto x = random_vector<double>(n * c, 23), w = random_vector<double>(c, 24), b = random_vector<double>(c, 25);
  auto r = random_vector<double>(n * c, 26);
  auto forward = [&]() {
    auto dx = to_device(x), dw = to_device(w), db = to_device(b);
    Tensor1<double> y("y", n * c), mean("m", n), rstd("r", n);
    kernels::layernorm_forward<double>(mat(y, n, c), mean, rstd, mat(dx, n, c), dw, db);
    return to_host<double>(y);
  };
  auto loss = [&]() { return dot(forward(), r); };
  for (bool accumulate : {false, true}) {
    auto dx = to_device(x), dw = to_device(w), db = to_device(b), dr = to_device(r);
    Tensor1<double> y("y", n * c), mean("m", n), rstd("r", n);
    kernels::layernorm_forward<double>(mat(y, n, c), mean, rstd, mat(dx, n, c), dw, db);
    auto gx = to_device(std::vector<double>(n * c, accumulate ? 1.0 : 99.0));
    Tensor1<double> gw("gw", c), gb("gb", c);
    kernels::layernorm_backward<double>(mat(gx, n, c), gw, gb, mat(dr, n, c), mat(dx, n, c), dw, mean, rstd,
                                        accumulate);
    auto num = numeric_gradient(x, loss);
    if (accumulate)
      for (auto& g : num) g += 1.0;
    REQUIRE(max_rel_error(to_host<double>(gx), num) < 1e-7);
    REQUIRE(max_rel_error(to_host<double>(gw), numeric_gradient(w, loss)) < 1e-7);
    REQUIRE(max_rel_error(to_host<double>(gb), numeric_gradient(b, loss)) < 1e-7);
  }
}
