// bf16 products with fp32 accumulation (oneDNN): rounding to bf16, then every transpose
// and beta against a double-precision product of the rounded operands (what the kernel
// promises), and against the fp32 product (what mixed precision costs).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "kernels/matmul_bf16.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("round_to_bf16 rounds to nearest, ties to even, and keeps infinities and NaN", "[kernels][bf16]") {
  CHECK(kernels::round_to_bf16(1.0f) == 1.0f);
  CHECK(kernels::round_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);  // a tie: to the even 1.0
  CHECK(kernels::round_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));  // a tie: to even
  CHECK(kernels::round_to_bf16(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -9)) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(kernels::round_to_bf16(-3.14159f) == -3.140625f);
  CHECK(std::isinf(kernels::round_to_bf16(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(kernels::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
}

#ifdef STRATA_HAVE_DNNL
TEST_CASE("matmul_bf16 is the fp32-accumulated product of the bf16-rounded operands", "[kernels][bf16]") {
  const int m = 37, n = 29, k = 53;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const float beta : {0.0f, 0.5f}) {
        INFO("trans_a " << ta << " trans_b " << tb << " beta " << beta);
        const auto a = random_vector<float>(m * k, 11), b = random_vector<float>(k * n, 12);
        const auto c0 = random_vector<float>(m * n, 13);
        auto da = to_device(a), db = to_device(b), dc = to_device(c0);
        kernels::matmul_bf16(ta, tb, ta ? mat(da, k, m) : mat(da, m, k), tb ? mat(db, n, k) : mat(db, k, n), beta,
                             mat(dc, m, n));
        const auto c = to_host<float>(dc);
        std::vector<double> want(size_t(m) * n), exact(size_t(m) * n);
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double s = 0, e = 0;
            for (int p = 0; p < k; ++p) {
              const float x = ta ? a[p * m + i] : a[i * k + p], y = tb ? b[j * k + p] : b[p * n + j];
              s += double(kernels::round_to_bf16(x)) * double(kernels::round_to_bf16(y));
              e += double(x) * double(y);
            }
            want[i * n + j] = s + beta * double(c0[i * n + j]);
            exact[i * n + j] = e + beta * double(c0[i * n + j]);
          }
        const std::vector<double> got(c.begin(), c.end());
        CHECK(max_rel_error(got, want) < 1e-5);   // fp32 accumulation of exact bf16 products
        CHECK(max_rel_error(got, exact) < 2e-2);  // bf16 operands: 8 bits of mantissa
        CHECK(max_rel_error(got, exact) > 1e-5);  // and it did round them
      }
}
#endif
