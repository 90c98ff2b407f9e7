// bf16 products with fp32 accumulation (oneDNN): rounding to bf16, then every transpose
// and beta against a double-precision product of the rounded operands (what the kernel
// promises), and against the fp32 product (what mixed precision costs); attention's
// batched products in bf16 against fp32 attention.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention.hpp"
#include "kernels/bf16.hpp"
#include "kernels/column_sums.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul_bf16.hpp"
#include "support/bf16_gate.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("round_to_bf16 rounds to nearest, ties to even, keeps infinities and NaN, flushes subnormals",
          "[kernels][rounding]") {
  CHECK(kernels::round_to_bf16(1.0f) == 1.0f);
  CHECK(kernels::round_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);  // a tie: to the even 1.0
  CHECK(kernels::round_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));  // a tie: to even
  CHECK(kernels::round_to_bf16(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -9)) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(kernels::round_to_bf16(-3.14159f) == -3.140625f);
  CHECK(std::isinf(kernels::round_to_bf16(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(kernels::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(kernels::round_to_bf16(1e-40f) == 0.0f);  // subnormals to a signed zero, as the products round
  CHECK(std::signbit(kernels::round_to_bf16(-1e-40f)));
}

#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
TEST_CASE("to_bf16 and round_rows_to_bf16 round every float as the products' own rounding does, bit for bit",
          "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  // ties both ways, carries into the exponent and into infinity, subnormals, zeros,
  // infinities, quiet and signalling NaNs of both signs, then random bit patterns
  std::vector<uint32_t> bits = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3fffffffu, 0x7f7fffffu, 0x7f7f8000u,
                                0x00000001u, 0x807fffffu, 0x00400000u, 0x00800000u, 0x00000000u, 0x80000000u,
                                0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff80ffffu};
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bits.push_back(uint32_t(state >> 32));
  }
  std::vector<float> values(bits.size());
  std::memcpy(values.data(), bits.data(), bits.size() * sizeof(float));
  kernels::ProductWorkspace workspace;
  kernels::RoundedCopy copy(workspace, values.data(), int64_t(values.size()));
  const uint16_t* theirs = workspace.lookup(values.data(), int64_t(values.size()));
  REQUIRE(theirs != nullptr);
  int64_t differ = 0;
  for (size_t i = 0; i < values.size(); ++i)
    if (kernels::to_bf16(values[i]).bits != theirs[i] && ++differ < 10)
      FAIL_CHECK("float bits " << std::hex << bits[i] << ": to_bf16 " << kernels::to_bf16(values[i]).bits
                               << ", the products' rounding " << theirs[i]);
  CHECK(differ == 0);
  // the block conversion (the CPU's own instruction where it has one), over rows with
  // tails of every length 0-15 and a gap between rows
  const int64_t cols = 37, ld = 40, rows = int64_t(values.size()) / ld;
  std::vector<kernels::bf16> block(values.size(), kernels::bf16{0xdead});
  for (int64_t width = cols - 16; width <= cols; ++width) {
    kernels::round_rows_to_bf16(values.data(), ld, block.data(), ld, rows, width);
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < ld; ++j) {
        const size_t i = size_t(r * ld + j);
        wrong += j < width ? block[i].bits != theirs[i] : (width == cols - 16 && block[i].bits != 0xdead);
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("activations written as bf16 by their kernels give the products the bits they would round to",
          "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  // the layer norm's and GELU's bf16 outputs are their fp32 outputs rounded by to_bf16
  const int n = 37, c = 53;
  const auto x = random_vector<float>(n * c, 41), w = random_vector<float>(c, 42), bias = random_vector<float>(c, 43);
  auto dx = to_device(x), dw = to_device(w), db = to_device(bias);
  Tensor1<float> y("y", n * c), mean("mean", n), rstd("rstd", n);
  Tensor1<kernels::bf16> yb("yb", n * c);
  kernels::layernorm_forward<float>(mat(y, n, c), mean, rstd, mat(dx, n, c), dw, db);
  kernels::layernorm_forward<float>(V2<kernels::bf16>(yb.data(), n, c), mean, rstd, mat(dx, n, c), dw, db);
  Tensor1<float> g("g", n * c);
  Tensor1<kernels::bf16> gb("gb", n * c);
  kernels::gelu_forward<float>(g, dx);
  kernels::gelu_forward<float>(V1<kernels::bf16>(gb.data(), n * c), dx);
  const auto hy = to_host<float>(y), hg = to_host<float>(g);
  auto hyb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), yb);
  auto hgb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gb);
  int64_t differ = 0;
  for (int i = 0; i < n * c; ++i)
    differ += (hyb(i).bits != kernels::to_bf16(hy[i]).bits) + (hgb(i).bits != kernels::to_bf16(hg[i]).bits);
  CHECK(differ == 0);

  // a product reading A as bf16 equals the product rounding A itself, for every transpose
  // and beta, bit for bit
  const int m = 29, k = 53, nn = 31;
  kernels::ProductWorkspace workspace;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const float beta : {0.0f, 0.5f}) {
        INFO("trans_a " << ta << " trans_b " << tb << " beta " << beta);
        const auto a = random_vector<float>(m * k, 51), b = random_vector<float>(k * nn, 52);
        const auto c0 = random_vector<float>(m * nn, 53);
        auto da = to_device(a), db2 = to_device(b), dc = to_device(c0), dc16 = to_device(c0);
        Tensor1<kernels::bf16> da16("a16", a.size());  // A as a kernel writing bf16 would
        auto ha16 = Kokkos::create_mirror_view(da16);
        for (size_t i = 0; i < a.size(); ++i) ha16(i) = kernels::to_bf16(a[i]);
        Kokkos::deep_copy(da16, ha16);
        const V2<const float> bv = tb ? mat(db2, nn, k) : mat(db2, k, nn);
        kernels::matmul_bf16(workspace, ta, tb, ta ? mat(da, k, m) : mat(da, m, k), bv, beta, mat(dc, m, nn));
        const V2<const kernels::bf16> a16v(da16.data(), ta ? k : m, ta ? m : k);
        kernels::matmul_bf16(workspace, ta, tb, a16v, bv, beta, mat(dc16, m, nn));
        CHECK(to_host<float>(dc16) == to_host<float>(dc));
      }
}
#endif

#if defined(STRATA_HAVE_DNNL) || defined(KOKKOS_ENABLE_CUDA)
TEST_CASE("matmul_bf16 is the fp32-accumulated product of the bf16-rounded operands", "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  const int m = 37, n = 29, k = 53;
  kernels::ProductWorkspace workspace;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const float beta : {0.0f, 0.5f}) {
        INFO("trans_a " << ta << " trans_b " << tb << " beta " << beta);
        const auto a = random_vector<float>(m * k, 11), b = random_vector<float>(k * n, 12);
        const auto c0 = random_vector<float>(m * n, 13);
        auto da = to_device(a), db = to_device(b), dc = to_device(c0);
        kernels::matmul_bf16(workspace, ta, tb, ta ? mat(da, k, m) : mat(da, m, k), tb ? mat(db, n, k) : mat(db, k, n),
                             beta, mat(dc, m, n));
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

#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
TEST_CASE("matmul_bf16_bias adds the bias in the product's epilogue: the bits of a C seeded with it and accumulated",
          "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  REQUIRE(kernels::bf16_bias_in_product());
  kernels::ProductWorkspace workspace;
  // a K of several of oneDNN's blocks, and one that is not a multiple of any
  for (const int k : {53, 1536}) {
    const int m = 67, n = 96;
    INFO("k " << k);
    const auto a = random_vector<float>(m * k, 21), b = random_vector<float>(k * n, 22),
               bias = random_vector<float>(n, 23);
    auto da = to_device(a), db = to_device(b), dbias = to_device(bias);
    std::vector<float> seeded(size_t(m) * n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) seeded[i * n + j] = bias[j];
    auto want = to_device(seeded), got = to_device(std::vector<float>(size_t(m) * n, 7.0f));  // got: overwritten
    kernels::matmul_bf16(workspace, false, false, mat(da, m, k), mat(db, k, n), 1.0f, mat(want, m, n));
    kernels::matmul_bf16_bias(workspace, false, false, mat(da, m, k), mat(db, k, n), V1<const float>(dbias),
                              mat(got, m, n));
    const auto w = to_host<float>(want), g = to_host<float>(got);
    CHECK(std::memcmp(w.data(), g.data(), w.size() * sizeof(float)) == 0);
    // and with A already rounded (a kernel wrote it as bf16)
    std::vector<kernels::bf16> a16(a.size());
    for (size_t i = 0; i < a.size(); ++i) a16[i] = kernels::to_bf16(a[i]);
    Tensor1<kernels::bf16> da16("a16", a16.size());
    std::memcpy(da16.data(), a16.data(), a16.size() * sizeof(kernels::bf16));
    auto got16 = to_device(std::vector<float>(size_t(m) * n, 7.0f));
    kernels::matmul_bf16_bias(workspace, false, false, V2<const kernels::bf16>(da16.data(), m, k), mat(db, k, n),
                              V1<const float>(dbias), mat(got16, m, n));
    const auto g16 = to_host<float>(got16);
    CHECK(std::memcmp(w.data(), g16.data(), w.size() * sizeof(float)) == 0);
  }
}
#endif

#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
TEST_CASE(
    "under RowsVary, products of any row count share one primitive per kind and are the rounded operands' "
    "fp32 product",
    "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  kernels::ProductWorkspace workspace;
  const int n = 48, inner = 40;
  const auto b = random_vector<float>(inner * n, 31), bias = random_vector<float>(n, 32);
  auto db = to_device(b), dbias = to_device(bias);
  // a parameter buffer the products read from its rounded copy (as the experts' weights)
  uint64_t changes = 1;
  kernels::RoundedCopy copy(workspace, db.data(), int64_t(b.size()), &changes);
  const kernels::ProductWorkspace::RowsVary vary(workspace);
  int64_t kinds = 0;
  for (const int rows : {7, 64, 33, 129, 1}) {
    INFO("rows " << rows);
    const auto a = random_vector<float>(rows * inner, 33 + rows), g = random_vector<float>(rows * n, 34 + rows);
    auto da = to_device(a), dg = to_device(g);
    // forward with a bias: (rows, inner) (inner, n); input gradient: (rows, n) (inner, n)^T;
    // weight gradient, accumulated: (rows, inner)^T (rows, n), the rows the reduction
    auto out = to_device(std::vector<float>(size_t(rows) * n, 5.0f));
    auto dx = to_device(std::vector<float>(size_t(rows) * inner, 5.0f));
    const auto w0 = random_vector<float>(inner * n, 35);
    auto dw = to_device(w0);
    kernels::matmul_bf16_bias(workspace, false, false, mat(da, rows, inner), mat(db, inner, n), V1<const float>(dbias),
                              mat(out, rows, n));
    kernels::matmul_bf16(workspace, false, true, mat(dg, rows, n), mat(db, inner, n), 0.0f, mat(dx, rows, inner));
    kernels::matmul_bf16(workspace, true, false, mat(da, rows, inner), mat(dg, rows, n), 1.0f, mat(dw, inner, n));
    const auto r = [](float x) { return double(kernels::round_to_bf16(x)); };
    std::vector<double> want_out(size_t(rows) * n), want_dx(size_t(rows) * inner), want_dw(size_t(inner) * n);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < n; ++j) {
        double s = bias[j];
        for (int p = 0; p < inner; ++p) s += r(a[i * inner + p]) * r(b[p * n + j]);
        want_out[i * n + j] = s;
      }
    for (int i = 0; i < rows; ++i)
      for (int p = 0; p < inner; ++p) {
        double s = 0;
        for (int j = 0; j < n; ++j) s += r(g[i * n + j]) * r(b[p * n + j]);
        want_dx[i * inner + p] = s;
      }
    for (int p = 0; p < inner; ++p)
      for (int j = 0; j < n; ++j) {
        double s = w0[p * n + j];
        for (int i = 0; i < rows; ++i) s += r(a[i * inner + p]) * r(g[i * n + j]);
        want_dw[p * n + j] = s;
      }
    const auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    CHECK(max_rel_error(as_double(to_host<float>(out)), want_out) < 1e-5);
    CHECK(max_rel_error(as_double(to_host<float>(dx)), want_dx) < 1e-5);
    CHECK(max_rel_error(as_double(to_host<float>(dw)), want_dw) < 1e-5);
    if (kinds == 0) kinds = workspace.primitives();
    CHECK(workspace.primitives() == kinds);  // no primitive per row count
  }
  CHECK(kinds == 3);
  CHECK(workspace.copy_reads() > 0);  // the weights were read from their copy
}
#endif

#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
TEST_CASE("cross_entropy_backward_bf16 writes the float backward's dlogits rounded, bit for bit", "[kernels][bf16]") {
  // a vocabulary of more than one of the kernel's 1024-value segments, targets in each,
  // and a vocabulary block that does not hold every row's target (vocab_begin)
  const int n = 9, v = 2500;
  for (const int64_t vocab_begin : {0, 700}) {
    INFO("vocab_begin " << vocab_begin);
    const auto logits = random_vector<float>(n * v, 41);
    std::vector<int32_t> targets(n);
    for (int i = 0; i < n; ++i) targets[i] = int32_t((i * 977 + 5) % (v + 700));
    std::vector<float> lse(n);
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < v; ++j) s += std::exp(double(logits[i * v + j]));
      lse[i] = float(std::log(s));
    }
    auto dl = to_device(logits), dlse = to_device(lse);
    Tensor1<int32_t> dt("targets", n);
    std::memcpy(dt.data(), targets.data(), n * sizeof(int32_t));
    auto want = to_device(std::vector<float>(size_t(n) * v));
    kernels::cross_entropy_backward<float>(mat(want, n, v), mat(dl, n, v), V1<const float>(dlse), V1<const int32_t>(dt),
                                           0.25f, vocab_begin);
    std::vector<kernels::bf16> got(size_t(n) * v);
    kernels::cross_entropy_backward_bf16<float>(got.data(), mat(dl, n, v), V1<const float>(dlse), V1<const int32_t>(dt),
                                                0.25f, vocab_begin);
    const auto w = to_host<float>(want);
    int64_t differ = 0, targets_seen = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      differ += kernels::to_bf16(w[i]).bits != got[i].bits;
      targets_seen += w[i] < 0;
    }
    CHECK(differ == 0);
    CHECK(targets_seen > 0);
  }
}
#endif

#if defined(STRATA_HAVE_DNNL) && !defined(KOKKOS_ENABLE_CUDA)
TEST_CASE("add_column_sums_rounding adds add_column_sums' bits and writes the matrix rounded, bit for bit",
          "[kernels][bf16]") {
  // row counts below, at and above the reductions' chunking (16 rows a chunk, 64 chunks)
  for (const int rows : {5, 16, 333, 2048}) {
    const int cols = 77;
    INFO("rows " << rows);
    const auto m = random_vector<float>(rows * cols, 51 + rows), acc0 = random_vector<float>(cols, 52);
    auto dm = to_device(m), want = to_device(acc0), got = to_device(acc0);
    kernels::add_column_sums<float>(V1<float>(want), mat(dm, rows, cols));
    std::vector<kernels::bf16> rounded(size_t(rows) * cols);
    kernels::add_column_sums_rounding<float>(V1<float>(got), mat(dm, rows, cols), rounded.data());
    const auto w = to_host<float>(want), g = to_host<float>(got);
    CHECK(std::memcmp(w.data(), g.data(), w.size() * sizeof(float)) == 0);
    CHECK(w != acc0);
    int64_t differ = 0;
    for (size_t i = 0; i < m.size(); ++i) differ += kernels::to_bf16(m[i]).bits != rounded[i].bits;
    CHECK(differ == 0);
  }
}
#endif

TEST_CASE("matmul_bf16_strided_batched multiplies submatrices a stride apart and writes nothing else",
          "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  // 3 matrices each, inside wider arrays (as attention's heads are column blocks of qkv)
  const int batch = 3, m = 9, n = 7, k = 11, lda = 15, ldb = 13, ldc = 10, sa = 200, sb = 190, sc = 95;
  kernels::ProductWorkspace workspace;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      INFO("trans_a " << ta << " trans_b " << tb);
      const auto a = random_vector<float>(batch * sa, 21), b = random_vector<float>(batch * sb, 22);
      const auto c0 = random_vector<float>(batch * sc, 23);
      auto da = to_device(a), db = to_device(b), dc = to_device(c0);
      kernels::matmul_bf16_strided_batched(workspace, ta, tb, m, n, k, da.data(), lda, sa, db.data(), ldb, sb, 0.0f,
                                           dc.data(), ldc, sc, batch);
      const auto c = to_host<float>(dc);
      const auto at = [&](int i, int r, int q) { return ta ? a[i * sa + q * lda + r] : a[i * sa + r * lda + q]; };
      const auto bt = [&](int i, int q, int col) { return tb ? b[i * sb + col * ldb + q] : b[i * sb + q * ldb + col]; };
      double worst = 0;
      std::vector<bool> written(c.size(), false);
      for (int i = 0; i < batch; ++i)
        for (int r = 0; r < m; ++r)
          for (int col = 0; col < n; ++col) {
            double want = 0;
            for (int q = 0; q < k; ++q)
              want += double(kernels::round_to_bf16(at(i, r, q))) * double(kernels::round_to_bf16(bt(i, q, col)));
            const size_t idx = size_t(i) * sc + size_t(r) * ldc + col;
            written[idx] = true;
            worst = std::max(worst, std::abs(c[idx] - want) / std::max(1.0, std::abs(want)));
          }
      CHECK(worst < 1e-5);
      for (size_t idx = 0; idx < c.size(); ++idx)
        if (!written[idx]) REQUIRE(c[idx] == c0[idx]);
    }
}

TEST_CASE("attention in bf16 stays within bf16 rounding of fp32 attention, forward and backward", "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  const int b = 2, t = 300, h = 2, hs = 8, c = h * hs;  // two key blocks, five query blocks
  const auto qkv = random_vector<float>(b * t * 3 * c, 31), r = random_vector<float>(b * t * c, 32);
  const auto run = [&](kernels::ProductPrecision precision) {
    auto d = to_device(qkv), dr = to_device(r);
    Tensor1<float> y("y", b * t * c), lse("lse", b * h * t), g("g", b * t * 3 * c);
    kernels::attention_forward<float>(mat(y, b * t, c), mat(lse, b * h, t), mat(d, b * t, 3 * c), b, t, h, precision);
    kernels::attention_backward<float>(mat(g, b * t, 3 * c), mat(d, b * t, 3 * c), mat(y, b * t, c), mat(lse, b * h, t),
                                       mat(dr, b * t, c), b, t, h, precision);
    const auto hy = to_host<float>(y), hg = to_host<float>(g);
    return std::make_pair(std::vector<double>(hy.begin(), hy.end()), std::vector<double>(hg.begin(), hg.end()));
  };
  const auto fp32 = run(Precision::FP32);
  kernels::ProductWorkspace workspace;
  const auto bf16 = run(kernels::ProductPrecision(Precision::BF16, true, &workspace));
  if (kernels::RoundedCopy::pays()) CHECK(workspace.copy_reads() > 0);
  // Q, K, V and dO rounded once per pass (the default) against rounded in every block's
  // product: the same rounding, so the same bits
  const auto bf16_each = run(kernels::ProductPrecision(Precision::BF16, false, &workspace));
  CHECK(bf16_each.first == bf16.first);
  CHECK(bf16_each.second == bf16.second);
  CHECK(max_rel_error(bf16.first, fp32.first) < 2e-2);
  CHECK(max_rel_error(bf16.first, fp32.first) > 1e-5);  // the products did run in bf16
  CHECK(max_rel_error(bf16.second, fp32.second) < 3e-2);
  CHECK(max_rel_error(bf16.second, fp32.second) > 1e-5);
}

TEST_CASE("a ProductWorkspace is its model's alone: copies found in it only, its stack grown to the most in use",
          "[kernels][bf16]") {
  REQUIRE_BF16_PRODUCTS();
  if (!kernels::RoundedCopy::pays()) return;  // GPUs: no copies, no stack
  const auto x = random_vector<float>(1000, 61), y = random_vector<float>(300, 62);
  kernels::ProductWorkspace one, other;
  CHECK(one.bytes() == 0);
  {
    kernels::RoundedCopy xs(one, x.data(), int64_t(x.size()));  // a pass's copies, nested
    {
      kernels::RoundedCopy ys(one, y.data(), int64_t(y.size()));
      CHECK(one.lookup(y.data() + 10, 20) != nullptr);
      CHECK(other.lookup(y.data() + 10, 20) == nullptr);  // another model's products do not see it
      CHECK(one.lookup(y.data() + 290, 20) == nullptr);   // past its end
    }
    CHECK(one.lookup(y.data(), 1) == nullptr);  // ended
    CHECK(one.lookup(x.data(), 1000) != nullptr);
  }
  // 1000 and 300 values, each buffer rounded up to 32 values (64 bytes): the stack's
  // high-water mark, kept for the next pass
  CHECK(one.bytes() == 2 * (1024 + 320));
  CHECK(other.bytes() == 0);
  CHECK(one.copy_reads() == 2);
  {
    kernels::RoundedCopy again(one, x.data(), int64_t(x.size()));
    CHECK(one.bytes() == 2 * (1024 + 320));  // fits: no new memory
  }
  // a copy that owns its memory (the parameters') is not on the stack
  uint64_t changes = 0;
  kernels::RoundedCopy params(other, y.data(), int64_t(y.size()), &changes);
  CHECK(other.bytes() == 0);
  CHECK(other.lookup(y.data(), 300)[7] == kernels::to_bf16(y[7]).bits);
}
#endif
