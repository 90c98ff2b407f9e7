// The residual network's backward (opening layer, every residual step's adjoint and
// weight gradient, closing layer and loss) against central differences, in double, for
// the dense and the convolutional (3x3, im2col) variant.
#include <catch2/catch.hpp>
#include <cmath>

#include "model/resnet.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

namespace {
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

  std::vector<double> p = to_host<double>(store.params());
  auto loss = [&]() {
    auto h = Kokkos::create_mirror_view(store.params());
    for (size_t i = 0; i < p.size(); ++i) h(i) = p[i];
    Kokkos::deep_copy(store.params(), h);
    std::vector<Tensor2<double>> uu;
    Tensor2<double> lg;
    Tensor1<double> ls;
    return net.forward(x, labels, uu, lg, ls) / double(batch);
  };
  const auto numeric = numeric_gradient(p, loss, 1e-5);
  for (const auto& info : store.infos()) {
    std::vector<double> a(analytic.begin() + info.offset, analytic.begin() + info.offset + info.numel);
    std::vector<double> b(numeric.begin() + info.offset, numeric.begin() + info.offset + info.numel);
    INFO(info.name);
    REQUIRE(max_rel_error(a, b) < 1e-7);
  }
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
