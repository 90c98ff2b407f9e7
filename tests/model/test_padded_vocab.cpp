// model.padded_vocab_size (llm.c's padding of GPT-2's vocabulary): the embedding's extra
// rows start at zero, their logits are left out of the softmax, so a padded GPT gives the
// unpadded one's loss and gradients, the padding's gradient is exactly zero, and its
// backward passes the gradient check.
#include <catch2/catch.hpp>
#include <cmath>

#include "model/gpt.hpp"
#include "support/host_views.hpp"
#include "support/param_gradcheck.hpp"

using namespace strata;
using namespace strata::test;

namespace {
ModelConfig padded_config(int64_t padded) {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_embd = 8;
  cfg.n_head = 2;
  cfg.vocab_size = 11;
  cfg.padded_vocab_size = padded;
  cfg.seq_len = 5;
  cfg.init_std = 0.3;
  return cfg;
}
}  // namespace

TEST_CASE("a padded vocabulary gives the unpadded model's loss and gradients", "[model][padded_vocab]") {
  GPT<double> plain(padded_config(0), 7), padded(padded_config(16), 7);
  const BlockContext ctx{2, 5};
  const int64_t n = ctx.rows();
  const auto tok = to_device(hashed_tokens(n, 11, 2)), tgt = to_device(hashed_tokens(n, 11, 3));
  const auto& wp = padded.params().infos()[padded.params().index("wte")];
  REQUIRE(wp.shape == std::vector<int64_t>{16, 8});
  const auto p0 = to_host<double>(padded.params().params());
  for (int64_t i = 11 * 8; i < 16 * 8; ++i) REQUIRE(p0[size_t(wp.offset + i)] == 0.0);  // the padding starts at zero
  for (auto* m : {&plain, &padded}) {
    m->params().zero_grads();
    m->forward(ctx, tok, tgt);
    m->backward(ctx, 1.0 / double(n));
  }
  const double lp = plain.forward(ctx, tok, tgt), lq = padded.forward(ctx, tok, tgt);
  REQUIRE(std::abs(lp - lq) <= 1e-13 * std::abs(lp));
  const auto gp = to_host<double>(plain.params().grads()), gq = to_host<double>(padded.params().grads());
  const auto pp = to_host<double>(plain.params().params()), pq = to_host<double>(padded.params().params());
  for (const auto& info : plain.params().infos()) {
    INFO(info.name);
    const auto& other = padded.params().infos()[padded.params().index(info.name)];
    for (int64_t i = 0; i < info.numel; ++i) {
      REQUIRE(pp[size_t(info.offset + i)] == pq[size_t(other.offset + i)]);  // drawn by global index: the same
      REQUIRE(std::abs(gp[size_t(info.offset + i)] - gq[size_t(other.offset + i)]) <= 1e-12);
    }
  }
  for (int64_t i = 11 * 8; i < 16 * 8; ++i)
    REQUIRE(gq[size_t(wp.offset + i)] == 0.0);  // no gradient reaches the padding
  // padded logits are -inf: never the most likely token
  auto logits = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), padded.logits());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t v = 11; v < 16; ++v) REQUIRE(std::isinf(logits(r, v)));
}

TEST_CASE("a padded GPT's backward matches finite differences", "[model][padded_vocab][gradcheck]") {
  GPT<double> model(padded_config(16), 7);
  const BlockContext ctx{2, 5};
  const int64_t n = ctx.rows();
  const auto tok = to_device(hashed_tokens(n, 11, 2)), tgt = to_device(hashed_tokens(n, 11, 3));
  model.params().zero_grads();
  model.forward(ctx, tok, tgt);
  model.backward(ctx, 1.0 / double(n));
  check_param_gradients(model.params(), [&] { return model.forward(ctx, tok, tgt) / double(n); });
}
