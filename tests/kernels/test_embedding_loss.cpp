// Embedding and cross-entropy: forward against plain loops, backward against central
// differences (repeated tokens included, so the scatter-add is exercised).
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

static Tensor1<int32_t> tokens_device(const std::vector<int32_t>& t) {
  Tensor1<int32_t> d("tok", t.size());
  auto m = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < t.size(); ++i) m(i) = t[i];
  Kokkos::deep_copy(d, m);
  return d;
}

TEST_CASE("embedding forward gathers rows; backward matches finite differences with repeated tokens",
          "[kernels][embedding][gradcheck]") {
  const int vocab = 5, maxt = 4, c = 3, b = 2, t = 3;
  const std::vector<int32_t> tok = {1, 3, 1, 4, 1, 0};
  auto wte = random_vector<double>(vocab * c, 50), wpe = random_vector<double>(maxt * c, 51);
  auto r = random_vector<double>(b * t * c, 52);
  auto dtok = tokens_device(tok);
  auto forward = [&]() {
    auto a = to_device(wte), p = to_device(wpe);
    Tensor1<double> y("y", b * t * c);
    kernels::embedding_forward<double>(mat(y, b * t, c), dtok, mat(a, vocab, c), mat(p, maxt, c), t);
    return to_host<double>(y);
  };
  auto y = forward();
  for (int i = 0; i < b * t; ++i)
    for (int j = 0; j < c; ++j) REQUIRE(y[i * c + j] == wte[tok[i] * c + j] + wpe[(i % t) * c + j]);
  auto dr = to_device(r);
  Tensor1<double> gte("gte", vocab * c), gpe("gpe", maxt * c);
  kernels::embedding_backward<double>(mat(gte, vocab, c), mat(gpe, maxt, c), mat(dr, b * t, c), dtok, t);
  auto loss = [&]() { return dot(forward(), r); };
  REQUIRE(max_rel_error(to_host<double>(gte), numeric_gradient(wte, loss)) < 1e-8);
  REQUIRE(max_rel_error(to_host<double>(gpe), numeric_gradient(wpe, loss)) < 1e-8);
}

TEST_CASE("cross-entropy forward is -log softmax at the target; backward matches finite differences",
          "[kernels][cross_entropy][gradcheck]") {
  const int n = 4, v = 7;
  const std::vector<int32_t> tgt = {0, 6, 3, 3};
  auto logits = random_vector<double>(n * v, 53, 4.0);
  auto dtgt = tokens_device(tgt);
  auto forward = [&]() {
    auto d = to_device(logits);
    Tensor1<double> losses("l", n), lse("lse", n);
    return kernels::cross_entropy_forward<double>(losses, lse, mat(d, n, v), dtgt) / n;
  };
  double want = 0;
  for (int i = 0; i < n; ++i) {
    double z = 0;
    for (int j = 0; j < v; ++j) z += std::exp(logits[i * v + j]);
    want += (std::log(z) - logits[i * v + tgt[i]]) / n;
  }
  REQUIRE(forward() == Approx(want).epsilon(1e-12));

  auto d = to_device(logits);
  Tensor1<double> losses("l", n), lse("lse", n);
  kernels::cross_entropy_forward<double>(losses, lse, mat(d, n, v), dtgt);
  // in place: dlogits overwrites logits, as the model does
  kernels::cross_entropy_backward<double>(mat(d, n, v), mat(d, n, v), lse, dtgt, 1.0 / n);
  REQUIRE(max_rel_error(to_host<double>(d), numeric_gradient(logits, forward)) < 1e-7);
}
