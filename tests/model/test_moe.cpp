// The mixture-of-experts layer (model/moe_layer.hpp): its forward against the formulas
// written out on the host (router softmax, top-k, renormalised gates, the capacity's
// order and drops, the experts' MLPs, the load-balancing loss alpha E sum_i f_i P_i and
// the z-loss), and the GPT with mixture blocks against central differences for every
// parameter (the router's gradient through the renormalised gates, the auxiliary
// losses), top-1 and top-2, dropless and with a capacity that drops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng.hpp"
#include "kernels/gelu.hpp"
#include "model/gpt.hpp"
#include "model/moe_layer.hpp"
#include "support/host_views.hpp"
#include "support/param_gradcheck.hpp"

using namespace strata;
using namespace strata::test;

namespace {

struct HandResult {
  std::vector<double> out;  // (N, C)
  double aux = 0;           // the auxiliary losses' sum over the tokens
  int64_t dropped = 0;
};

// The layer's forward, written out: x (N, C) row-major, parameters from the store.
HandResult by_hand(const ModelConfig& cfg, const ParamStore<double>& store, const std::string& prefix,
                   const std::vector<double>& x, int64_t batch, int64_t seq_len) {
  const int64_t n = batch * seq_len, C = cfg.n_embd, E = cfg.moe_experts, k = cfg.moe_top_k, F = cfg.expert_hidden();
  const auto p = to_host<double>(store.params());
  const auto at = [&](const std::string& name) { return p.data() + store.infos()[store.index(prefix + name)].offset; };
  const double *wr = at("moe.router.weight"), *w1 = at("moe.fc.weight"), *b1 = at("moe.fc.bias");
  const double *w2 = at("moe.proj.weight"), *b2 = at("moe.proj.bias");
  std::vector<double> probs(static_cast<size_t>(n * E)), lse(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> z(size_t(E), 0.0);
    for (int64_t i = 0; i < E; ++i)
      for (int64_t c = 0; c < C; ++c) z[size_t(i)] += x[size_t(t * C + c)] * wr[c * E + i];
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0;
    for (double v : z) s += std::exp(v - m);
    lse[size_t(t)] = m + std::log(s);
    for (int64_t i = 0; i < E; ++i) probs[size_t(t * E + i)] = std::exp(z[size_t(i)] - lse[size_t(t)]);
  }
  // top k, ties to the lower expert
  std::vector<int64_t> chosen(static_cast<size_t>(n * k));
  std::vector<double> gate(static_cast<size_t>(n * k));
  std::vector<int64_t> count(size_t(E), 0);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return probs[size_t(t * E + a)] > probs[size_t(t * E + b)]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += probs[size_t(t * E + order[size_t(j)])];
    for (int64_t j = 0; j < k; ++j) {
      chosen[size_t(t * k + j)] = order[size_t(j)];
      const double pj = probs[size_t(t * E + order[size_t(j)])];
      gate[size_t(t * k + j)] = k == 1 ? pj : pj / sum;
      ++count[size_t(order[size_t(j)])];
    }
  }
  HandResult r;
  for (int64_t i = 0; i < E; ++i) {
    double P = 0;
    for (int64_t t = 0; t < n; ++t) P += probs[size_t(t * E + i)];
    const double f = double(count[size_t(i)]) / double(n * k);
    r.aux += cfg.moe_aux_loss * double(E) * f * P;  // summed over tokens: n times alpha E f_i P_i
  }
  for (int64_t t = 0; t < n; ++t) r.aux += cfg.moe_z_loss * lse[size_t(t)] * lse[size_t(t)];
  // capacity: first choices of every token before second ones, each in token order
  std::vector<char> kept(size_t(n * k), 1);
  if (cfg.moe_capacity_factor > 0) {
    const int64_t cap = int64_t(std::ceil(cfg.moe_capacity_factor * double(n * k) / double(E)));
    std::vector<int64_t> taken(size_t(E), 0);
    for (int64_t j = 0; j < k; ++j)
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = chosen[size_t(t * k + j)];
        kept[size_t(t * k + j)] = taken[size_t(i)]++ < cap;
        r.dropped += kept[size_t(t * k + j)] ? 0 : 1;
      }
  }
  r.out.assign(size_t(n * C), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      if (!kept[size_t(t * k + j)]) continue;
      const int64_t i = chosen[size_t(t * k + j)];
      std::vector<double> h(static_cast<size_t>(F));
      for (int64_t q = 0; q < F; ++q) {
        double s = b1[i * F + q];
        for (int64_t c = 0; c < C; ++c) s += x[size_t(t * C + c)] * w1[(i * C + c) * F + q];
        h[size_t(q)] = 0.5 * s * (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
      }
      for (int64_t c = 0; c < C; ++c) {
        double y = b2[i * C + c];
        for (int64_t q = 0; q < F; ++q) y += h[size_t(q)] * w2[(i * F + q) * C + c];
        r.out[size_t(t * C + c)] += gate[size_t(t * k + j)] * y;
      }
    }
  return r;
}

ModelConfig moe_config(int64_t experts, int64_t top_k, double capacity) {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_embd = 8;
  cfg.n_head = 2;
  cfg.vocab_size = 11;
  cfg.seq_len = 6;
  cfg.init_std = 0.3;  // large enough that every path carries signal
  cfg.moe_experts = experts;
  cfg.moe_top_k = top_k;
  cfg.moe_every = 1;
  cfg.moe_capacity_factor = capacity;
  cfg.moe_ffn_hidden = 12;
  cfg.moe_aux_loss = 0.05;
  cfg.moe_z_loss = 0.01;
  return cfg;
}

}  // namespace

TEST_CASE("the mixture layer's forward and auxiliary losses equal the formulas written out", "[model][moe]") {
  for (const auto& [top_k, capacity] :
       std::vector<std::pair<int64_t, double>>{{1, 0.0}, {2, 0.0}, {2, 1.0}, {1, 1.25}}) {
    INFO("top_k " << top_k << ", capacity factor " << capacity);
    const ModelConfig cfg = moe_config(4, top_k, capacity);
    ParamStore<double> store;
    const TensorParallel serial;
    const MoeLayer<double> layer(store, serial, ExpertParallel{}, TokenPlace{}, cfg, Precision::FP32, "blocks.0.", 0.5,
                                 0.5, true);
    store.allocate(11);
    const int64_t batch = 3, n = batch * cfg.seq_len, C = cfg.n_embd;
    std::vector<double> x(static_cast<size_t>(n * C));
    for (size_t i = 0; i < x.size(); ++i) x[i] = counter_normal(3, 4, i);
    Tensor2<double> xv("x", n, C), out("out", n, C);
    auto hx = Kokkos::create_mirror_view(xv);
    for (int64_t i = 0; i < n * C; ++i) hx.data()[i] = x[size_t(i)];
    Kokkos::deep_copy(xv, hx);
    MoeCache<double> cache;
    const double aux = layer.forward(BlockContext{batch, cfg.seq_len}, xv, out, cache);
    const HandResult want = by_hand(cfg, store, "blocks.0.", x, batch, cfg.seq_len);
    const auto got = to_host<double>(out);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want.out[i]));
    CHECK(worst < 1e-12);
    CHECK(aux == Approx(want.aux).epsilon(1e-12));
    CHECK(layer.load().dropped == want.dropped);
    if (capacity == 1.0) CHECK(want.dropped > 0);  // the case drops some assignments
    int64_t assigned = 0;
    for (auto a : layer.load().assigned) assigned += a;
    CHECK(assigned == n * top_k);
  }
}

TEST_CASE("GPT with mixture blocks: backward matches finite differences for every parameter",
          "[model][moe][gradcheck]") {
  for (const auto& [top_k, capacity] : std::vector<std::pair<int64_t, double>>{{2, 0.0}, {1, 0.0}, {2, 1.0}}) {
    INFO("top_k " << top_k << ", capacity factor " << capacity);
    ModelConfig cfg = moe_config(3, top_k, capacity);
    cfg.moe_every = 2;  // block 0 dense, block 1 a mixture
    GPT<double> model(cfg, 7);
    const BlockContext ctx{2, cfg.seq_len};
    const int64_t n = ctx.rows();
    const auto tok = to_device(hashed_tokens(n, cfg.vocab_size, 2)),
               tgt = to_device(hashed_tokens(n, cfg.vocab_size, 3));
    auto& store = model.params();
    store.zero_grads();
    model.forward(ctx, tok, tgt);
    model.take_aux_loss();
    model.backward(ctx, 1.0 / double(n));
    // the loss the gradients are of: the language loss and the auxiliary losses, per token
    check_param_gradients(store, [&] {
      const double lm = model.forward(ctx, tok, tgt);
      return (lm + model.take_aux_loss()) / double(n);
    });
  }
}
