// gemm (all transposes, batched) against a plain triple loop; a product cut along K into
// pieces against the uncut product, bit for bit; the linear layer's backward against
// central differences.
#include <catch2/catch.hpp>

#include "kernels/gemm_pieces.hpp"
#include "kernels/matmul.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

static std::vector<double> ref_gemm(bool ta, bool tb, const std::vector<double>& a, const std::vector<double>& b, int m,
                                    int n, int k) {
  std::vector<double> c(size_t(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

TEST_CASE("gemm matches a triple loop for every transpose", "[kernels][gemm]") {
  const int m = 7, n = 5, k = 9;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      auto a = random_vector<double>(m * k, 1), b = random_vector<double>(k * n, 2);
      auto da = to_device(a), db = to_device(b);
      Tensor1<double> dc("c", m * n);
      kernels::gemm<double>(ta ? "T" : "N", tb ? "T" : "N", 1.0, ta ? mat(da, k, m) : mat(da, m, k),
                            tb ? mat(db, n, k) : mat(db, k, n), 0.0, mat(dc, m, n));
      REQUIRE(max_rel_error(to_host<double>(dc), ref_gemm(ta, tb, a, b, m, n, k)) < 1e-12);
    }
}

#if !defined(KOKKOS_ENABLE_CUDA)
template <class T>
void check_pieces(int m, int n, int k, int pieces) {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'}) {
      const auto da = to_device(random_vector<T>(size_t(m) * k, 11)),
                 db = to_device(random_vector<T>(size_t(k) * n, 12));
      const V2<const T> a = ta == 'T' ? mat(da, k, m) : mat(da, m, k), b = tb == 'T' ? mat(db, n, k) : mat(db, k, n);
      Tensor1<T> whole("whole", size_t(m) * n), cut("cut", size_t(m) * n);
      kernels::gemm<T>(&ta, &tb, T(1), a, b, T(0), mat(whole, m, n));
      int between = 0;
      kernels::gemm_in_k_pieces<T>(ta, tb, a, b, mat(cut, m, n), pieces, [&] { ++between; });
      INFO(ta << tb << " m " << m << " n " << n << " k " << k << " in " << pieces);
      const int slices = (k + kernels::detail::kSliceK - 1) / kernels::detail::kSliceK,
                per_piece = (slices + pieces - 1) / pieces;
      CHECK(between >= 2);  // really cut, into whole slices
      CHECK(between == (slices + per_piece - 1) / per_piece);
      CHECK(to_host<T>(cut) == to_host<T>(whole));
    }
}

TEST_CASE("a product cut into pieces along K gives the uncut product's bits, every transpose", "[kernels][gemm]") {
  // the 3D layers' forward (N N), input gradient (N T) and weight gradient (T N) cuts
  for (int k : {257, 700, 1040})
    for (int pieces : {2, 4}) {
      check_pieces<float>(37, 70, k, pieces);
      check_pieces<float>(70, 37, k, pieces);
      check_pieces<double>(37, 70, k, pieces);
    }
}
#endif

TEST_CASE("gemm_strided_batched applies gemm per slice and honours beta", "[kernels][gemm]") {
  const int batch = 3, m = 4, n = 6, k = 5;
  auto a = random_vector<double>(batch * m * k, 3), b = random_vector<double>(batch * n * k, 4);
  auto c0 = random_vector<double>(batch * m * n, 5);
  auto da = to_device(a), db = to_device(b), dc = to_device(c0);
  kernels::gemm_strided_batched<double>('N', 'T', m, n, k, 2.0, da.data(), k, m * k, db.data(), k, n * k, 0.5,
                                        dc.data(), n, m * n, batch);
  auto c = to_host<double>(dc);
  for (int s = 0; s < batch; ++s) {
    std::vector<double> as(a.begin() + s * m * k, a.begin() + (s + 1) * m * k);
    std::vector<double> bs(b.begin() + s * n * k, b.begin() + (s + 1) * n * k);
    auto r = ref_gemm(false, true, as, bs, m, n, k);
    for (int i = 0; i < m * n; ++i)
      REQUIRE(c[s * m * n + i] == Approx(2.0 * r[i] + 0.5 * c0[s * m * n + i]).epsilon(1e-12));
  }
}

TEST_CASE("matmul forward adds the bias and its backward matches finite differences", "[kernels][gemm][gradcheck]") {
  const int n = 6, in = 5, out = 7;
  auto x = random_vector<double>(n * in, 10), w = random_vector<double>(in * out, 11);
  auto bias = random_vector<double>(out, 12), r = random_vector<double>(n * out, 13);
  auto forward = [&]() {
    auto dx = to_device(x), dw = to_device(w), db = to_device(bias);
    Tensor1<double> y("y", n * out);
    kernels::matmul_forward<double>(mat(y, n, out), mat(dx, n, in), mat(dw, in, out), db);
    return to_host<double>(y);
  };
  // forward against the reference
  auto y = forward();
  auto yr = ref_gemm(false, false, x, w, n, out, in);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) yr[i * out + j] += bias[j];
  REQUIRE(max_rel_error(y, yr) < 1e-12);

  auto dx = to_device(x), dw = to_device(w), dr = to_device(r);
  Tensor1<double> gx("gx", n * in), gw("gw", in * out), gb("gb", out);
  kernels::matmul_backward<double>(mat(gx, n, in), mat(gw, in, out), gb, mat(dr, n, out), mat(dx, n, in),
                                   mat(dw, in, out));
  auto loss = [&]() { return dot(forward(), r); };
  REQUIRE(max_rel_error(to_host<double>(gx), numeric_gradient(x, loss)) < 1e-7);
  REQUIRE(max_rel_error(to_host<double>(gw), numeric_gradient(w, loss)) < 1e-7);
  REQUIRE(max_rel_error(to_host<double>(gb), numeric_gradient(bias, loss)) < 1e-7);
}

TEST_CASE("add_column_sums adds each column's sum, in float within rounding", "[kernels][gemm]") {
  const int64_t rows = 37, cols = 19;
  const auto h = random_vector<float>(size_t(rows * cols), 81);
  const Tensor1<float> m = to_device(h);
  Tensor1<float> acc = to_device(std::vector<float>(cols, 1.0f));
  kernels::add_column_sums<float>(acc, mat(m, rows, cols));
  const auto got = to_host<float>(acc);
  for (int64_t j = 0; j < cols; ++j) {
    double want = 1.0;
    for (int64_t i = 0; i < rows; ++i) want += h[i * cols + j];
    REQUIRE(got[j] == Approx(want).margin(1e-5));
  }
}
