// XPipe's weight prediction against the updates it predicts: with a constant gradient
// (a linear loss), the weights predicted s updates ahead equal the weights AdamW reaches
// after s more updates to rounding, while the current weights are off by about s * lr.
#include <catch2/catch.hpp>
#include <cmath>

#include "optim/adamw.hpp"
#include "optim/weight_prediction.hpp"
#include "support/host_views.hpp"

using namespace strata;

TEST_CASE("weight prediction is exact for a constant gradient", "[optim][xpipe]") {
  OptimConfig cfg;
  cfg.weight_decay = 0;  // decoupled decay is not part of the prediction
  const double lr = 1e-2;
  ParamStore<double> store;
  store.add("w", {64, 3}, Init::Normal, 0.5, true);
  store.allocate(3);
  const auto g = test::random_vector<double>(size_t(store.numel()), 17);
  Kokkos::deep_copy(store.grads(), test::to_device(g));
  AdamW<double> opt(cfg);
  for (int i = 0; i < 3; ++i) opt.step(store, lr);  // the moments have history

  for (int s : {1, 2, 5}) {
    const auto now = test::to_host<double>(store.params());
    WeightPredictor<double> predictor(cfg);
    predictor.predict(store, lr, {s, opt.steps_taken()});
    const auto predicted = test::to_host<double>(store.params());
    predictor.restore(store);
    CHECK(test::to_host<double>(store.params()) == now);  // the true weights come back bit for bit
    for (int i = 0; i < s; ++i) opt.step(store, lr);
    const auto target = test::to_host<double>(store.params());
    double with = 0, without = 0;
    for (size_t i = 0; i < now.size(); ++i) {
      with = std::max(with, std::abs(predicted[i] - target[i]));
      without = std::max(without, std::abs(now[i] - target[i]));
    }
    INFO("s = " << s);
    CHECK(with < 1e-12);
    CHECK(without == Approx(s * lr).epsilon(1e-3));  // |g| >> eps: each update moves lr
  }
}
