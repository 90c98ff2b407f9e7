// The residual network's backward (opening layer, every residual step's adjoint and
// weight gradient, closing layer and loss) against central differences, in double, for
// the dense and the convolutional (3x3, im2col) variant. Then the network as a StageModel
// (what the data-parallel and pipeline engines run): whole, and cut into two stages that
// pass the state and its gradient, it gives the reference backward's gradients.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>

#include "model/resnet.hpp"
#include "support/host_views.hpp"
#include "support/param_gradcheck.hpp"

using namespace strata;
using namespace strata::test;

namespace {
// The StageModel path against the reference gradients `analytic` of net.
void check_stages(const ResNetConfig& cfg, ResNet<double>& net, V2<const double> x, V1<const int32_t> labels,
                  const std::vector<double>& analytic) {
  const int64_t batch = int64_t(x.extent(0));
  SampleBatch<double> all;
  all.samples = batch;
  all.features = x;
  all.targets = labels;
  const BlockContext ctx = net.context(batch);
  const double scale = 1.0 / double(batch);
  // whole: the same operations in the same order as the reference, and the gradient
  // ranges handed over in grad_ready_order, from the end of the buffer to its start
  {
    auto cache = net.make_cache();
    net.params().zero_grads();
    net.forward(ctx, all, {}, *cache);
    std::vector<std::pair<int64_t, int64_t>> handed;
    net.backward(ctx, scale, {}, *cache, [&](int64_t offset, int64_t count) {
      handed.push_back({offset, offset + count});
    });
    CHECK(to_host<double>(net.params().grads()) == analytic);
    CHECK(handed == net.grad_ready_order());
    CHECK(handed.front().second == net.params().numel());
    CHECK(handed.back().first == 0);
    for (size_t i = 1; i < handed.size(); ++i) CHECK(handed[i].second == handed[i - 1].first);
    CHECK(cache->bytes() == net.memory_for(ctx).cache);
  }
  // two stages: the first opens and runs its steps, the second the rest and the loss
  std::vector<std::unique_ptr<ResNet<double>>> stages;
  std::vector<std::unique_ptr<StageCache>> caches;
  for (int s = 0; s < 2; ++s) {
    stages.push_back(std::make_unique<ResNet<double>>(cfg, 11, StagePlacement::balanced(int(cfg.steps), 2, s)));
    caches.push_back(stages[s]->make_cache());
    auto& st = stages[s]->params();
    for (int i = 0; i < int(st.infos().size()); ++i)
      if (st.infos()[i].numel > 0)
        Kokkos::deep_copy(st.param(i), net.params().param(net.params().index(st.infos()[i].name)));
    st.zero_grads();
  }
  stages[0]->forward(ctx, all, {}, *caches[0]);
  const double loss = stages[1]->forward(ctx, all, stages[0]->output(*caches[0]), *caches[1]);
  CHECK(loss * scale == Approx(net.forward(ctx, all, {}, *net.make_cache()) * scale).epsilon(1e-15));
  stages[1]->backward(ctx, scale, {}, *caches[1]);
  stages[0]->backward(ctx, scale, stages[1]->input_grad(*caches[1]), *caches[0]);
  for (const auto& s : stages) {
    const auto g = to_host<double>(s->params().grads());
    for (const auto& info : s->params().infos()) {
      if (info.numel == 0) continue;
      const auto& ref = net.params().infos()[size_t(net.params().index(info.name))];
      INFO(info.name << " on stage " << s->placement().stage);
      for (int64_t e = 0; e < info.numel; ++e) CHECK(g[size_t(info.offset + e)] == analytic[size_t(ref.offset + e)]);
    }
    CHECK(caches[size_t(s->placement().stage)]->bytes() == s->memory_for(ctx).cache);
  }
}

void check_gradients(const ResNetConfig& cfg) {
  ResNet<double> net(cfg, 11);
  const int64_t batch = 4;
  Tensor2<double> x("x", batch, cfg.inputs);
  Tensor1<int32_t> labels("labels", batch);
  auto hx = Kokkos::create_mirror_view(x);
  auto hl = Kokkos::create_mirror_view(labels);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t p = 0; p < cfg.inputs; ++p) hx(i, p) = std::cos(1.3 * double(i * cfg.inputs + p));
    hl(i) = int32_t((i * 2) % cfg.classes);
  }
  Kokkos::deep_copy(x, hx);
  Kokkos::deep_copy(labels, hl);
  // non-zero biases, so their gradients and the tanh' at an offset are exercised
  auto& store = net.params();
  {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.params());
    for (const auto& info : store.infos())
      if (info.name.find("bias") != std::string::npos)
        for (int64_t e = 0; e < info.numel; ++e) h(info.offset + e) = 0.1 * std::sin(double(info.offset + e));
    Kokkos::deep_copy(store.params(), h);
  }
  std::vector<Tensor2<double>> u;
  Tensor2<double> logits;
  Tensor1<double> lse;
  store.zero_grads();
  net.forward(x, labels, u, logits, lse);
  net.backward(x, labels, 1.0 / double(batch), u, logits, lse);
  const auto analytic = to_host<double>(store.grads());
  check_param_gradients(store, [&] {
    std::vector<Tensor2<double>> uu;
    Tensor2<double> lg;
    Tensor1<double> ls;
    return net.forward(x, labels, uu, lg, ls) / double(batch);
  });
  check_stages(cfg, net, x, labels, analytic);
}
}  // namespace

TEST_CASE("ResNet backward matches finite differences for every parameter", "[model][gradcheck][resnet]") {
  ResNetConfig cfg;
  cfg.inputs = 7;
  cfg.width = 5;
  cfg.steps = 4;
  cfg.classes = 3;
  cfg.t_final = 1.5;
  cfg.init_std = 0.5;
  cfg.step_init_std = 0.5;
  check_gradients(cfg);
}

TEST_CASE("the convolutional ResNet's backward matches finite differences", "[model][gradcheck][resnet]") {
  ResNetConfig cfg;
  cfg.inputs = 16;  // 4 x 4 images
  cfg.channels = 2;
  cfg.steps = 3;
  cfg.classes = 3;
  cfg.t_final = 1.5;
  cfg.init_std = 0.5;
  cfg.step_init_std = 0.4;
  check_gradients(cfg);
}
