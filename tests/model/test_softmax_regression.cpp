// The softmax regression (model.kind = "softmax"): its backward against central
// differences for both parameters, through the StageModel interface the engines use, and
// its two halves equal to the whole backward bit for bit.
#include <catch2/catch.hpp>
#include <cmath>

#include "model/softmax_regression.hpp"
#include "support/host_views.hpp"
#include "support/param_gradcheck.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct Batch {
  Tensor2<double> x;
  Tensor1<int32_t> labels;
  SampleBatch<double> view() const {
    SampleBatch<double> b;
    b.samples = int64_t(x.extent(0));
    b.features = x;
    b.targets = labels;
    return b;
  }
};

Batch make_batch(int64_t batch, int64_t inputs, int64_t classes) {
  Batch b{Tensor2<double>("x", batch, inputs), Tensor1<int32_t>("labels", batch)};
  auto hx = Kokkos::create_mirror_view(b.x);
  auto hl = Kokkos::create_mirror_view(b.labels);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t j = 0; j < inputs; ++j) hx(i, j) = std::sin(0.7 * double(i * inputs + j) + 0.3);
    hl(i) = int32_t((3 * i + 1) % classes);
  }
  Kokkos::deep_copy(b.x, hx);
  Kokkos::deep_copy(b.labels, hl);
  return b;
}

SoftmaxRegressionConfig small_config() {
  SoftmaxRegressionConfig c;
  c.inputs = 6;
  c.classes = 4;
  c.init_std = 0.5;
  return c;
}

}  // namespace

TEST_CASE("the softmax regression's backward matches finite differences", "[model][gradcheck][softmax]") {
  const auto cfg = small_config();
  SoftmaxRegression<double> model(cfg, 5);
  const int64_t batch = 5;
  const Batch data = make_batch(batch, cfg.inputs, cfg.classes);
  auto& store = model.params();
  {  // a non-zero bias, so its gradient is exercised away from the start
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.params());
    const auto& bias = store.infos()[1];
    for (int64_t e = 0; e < bias.numel; ++e) h(bias.offset + e) = 0.2 * std::cos(double(e));
    Kokkos::deep_copy(store.params(), h);
  }
  const BlockContext ctx = model.context(batch);
  auto cache = model.make_cache();
  store.zero_grads();
  model.forward(ctx, data.view(), {}, *cache);
  std::vector<std::pair<int64_t, int64_t>> handed;
  model.backward(ctx, 1.0 / double(batch), {}, *cache, [&](int64_t o, int64_t n) { handed.emplace_back(o, n); });
  REQUIRE(handed.size() == 1);
  const auto& bias = store.infos()[1];
  CHECK(handed[0] == std::make_pair(int64_t(0), bias.offset + bias.numel));  // every gradient, once
  check_param_gradients(store, [&] {
    auto c = model.make_cache();
    return model.forward(ctx, data.view(), {}, *c) / double(batch);
  });
}

TEST_CASE("the softmax regression's backward halves equal its backward", "[model][softmax]") {
  const auto cfg = small_config();
  SoftmaxRegression<double> model(cfg, 5);
  const Batch data = make_batch(7, cfg.inputs, cfg.classes);
  const BlockContext ctx = model.context(7);
  auto whole = model.make_cache(), halves = model.make_cache();
  model.params().zero_grads();
  model.forward(ctx, data.view(), {}, *whole);
  model.backward(ctx, 0.25, {}, *whole);
  const auto expected = to_host<double>(model.params().grads());
  model.params().zero_grads();
  model.forward(ctx, data.view(), {}, *halves);
  model.backward_input(ctx, 0.25, {}, *halves);
  model.backward_weight(ctx, *halves, {});
  CHECK(to_host<double>(model.params().grads()) == expected);
  CHECK(model.correct(*halves) == model.correct(*whole));
  CHECK(model.memory_for(ctx).cache == halves->bytes());
}
