// The whole GPT's backward (embedding, every block, tied LM head, loss) against central
// differences of the loss, in double precision, for every parameter.
#include <catch2/catch.hpp>

#include "model/gpt.hpp"
#include "support/host_views.hpp"
#include "support/param_gradcheck.hpp"

using namespace strata;
using namespace strata::test;

TEST_CASE("GPT backward matches finite differences for every parameter", "[model][gradcheck]") {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_embd = 8;
  cfg.n_head = 2;
  cfg.vocab_size = 11;
  cfg.seq_len = 5;
  cfg.init_std = 0.3;  // large enough that every path carries signal
  GPT<double> model(cfg, 7);
  const BlockContext ctx{2, cfg.seq_len};
  const int64_t n = ctx.rows();
  auto ids = hashed_tokens(n, cfg.vocab_size, 2);
  ids[3] = ids[7];  // a repeated token exercises the embedding scatter-add
  const auto tok = to_device(ids), tgt = to_device(hashed_tokens(n, cfg.vocab_size, 3));

  auto& store = model.params();
  model.params().zero_grads();
  model.forward(ctx, tok, tgt);
  model.backward(ctx, 1.0 / double(n));
  check_param_gradients(store, [&] { return model.forward(ctx, tok, tgt) / double(n); });
}

TEST_CASE("initial weights are a pure function of (seed, name, index)", "[model][init]") {
  ModelConfig cfg;
  cfg.n_layer = 1;
  cfg.n_embd = 8;
  cfg.n_head = 2;
  cfg.vocab_size = 16;
  cfg.seq_len = 4;
  GPT<float> a(cfg, 42), b(cfg, 42), c(cfg, 43);
  const auto pa = to_host<float>(a.params().params()), pb = to_host<float>(b.params().params());
  const auto pc = to_host<float>(c.params().params());
  REQUIRE(pa == pb);
  REQUIRE(pa != pc);
  // a tensor's values do not depend on what else the model holds: wte of a deeper model is
  // the same tensor
  cfg.n_layer = 3;
  GPT<float> deeper(cfg, 42);
  const auto& i1 = a.params().infos()[a.params().index("wte")];
  const auto& i3 = deeper.params().infos()[deeper.params().index("wte")];
  const auto pd = to_host<float>(deeper.params().params());
  REQUIRE(std::equal(pa.begin() + i1.offset, pa.begin() + i1.offset + i1.numel, pd.begin() + i3.offset));
  // GPT-2 initialisation statistics: wte ~ N(0, 0.02^2), layernorm weights 1, biases 0
  double s2 = 0;
  for (int64_t i = 0; i < i1.numel; ++i) s2 += double(pa[i1.offset + i]) * pa[i1.offset + i];
  REQUIRE(std::sqrt(s2 / double(i1.numel)) == Approx(0.02).epsilon(0.25));
  const auto& ln = a.params().infos()[a.params().index("blocks.0.ln1.weight")];
  const auto& bias = a.params().infos()[a.params().index("blocks.0.attn.qkv.bias")];
  for (int64_t i = 0; i < ln.numel; ++i) REQUIRE(pa[ln.offset + i] == 1.0f);
  for (int64_t i = 0; i < bias.numel; ++i) REQUIRE(pa[bias.offset + i] == 0.0f);
}
