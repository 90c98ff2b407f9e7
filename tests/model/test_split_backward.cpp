// The backward run as two halves (input gradient, then weight gradients: what zero-bubble
// pipeline schedules run apart) gives bit for bit the fused backward's gradients, for the
// GPT and the residual network (dense and convolutional), whole and cut into two stages,
// with two micro-batches whose weight halves wait until both input halves have run (as
// ZB-H1 orders them). The fused backward itself is checked against finite differences
// in test_gpt_gradcheck.cpp and test_resnet_gradcheck.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <memory>

#include "model/gpt.hpp"
#include "model/resnet.hpp"
#include "support/host_views.hpp"

using namespace strata;
using namespace strata::test;

namespace {
template <class T>
using StageList = std::vector<std::unique_ptr<StageModel<T>>>;

struct SplitResult {
  std::vector<std::vector<float>> grads;        // per stage
  std::vector<std::vector<float>> input_grads;  // per stage but the first, per micro-batch (concatenated)
};

// Runs `micro` micro-batches through the stages forward, then backward: fused per
// micro-batch, or every micro-batch's input half (last stage first) and then every weight
// half in micro-batch order.
template <class T>
SplitResult run(StageList<T>& stages, const SampleBatch<T>& batch, int micro, bool split) {
  const int p = int(stages.size());
  const int64_t bm = batch.samples / micro, per = stages[0]->targets_per_sample();
  const BlockContext ctx = stages[0]->context(bm);
  const T scale = T(1.0 / double(batch.samples * per));
  std::vector<std::vector<std::unique_ptr<StageCache>>> caches(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    stages[s]->params().zero_grads();
    for (int mb = 0; mb < micro; ++mb) caches[s].push_back(stages[s]->make_cache());
  }
  for (int mb = 0; mb < micro; ++mb) {
    const SampleBatch<T> part = batch.slice(mb * bm, (mb + 1) * bm, per);
    for (int s = 0; s < p; ++s)
      stages[s]->forward(ctx, part, s == 0 ? V2<const T>() : stages[s - 1]->output(*caches[s - 1][mb]), *caches[s][mb]);
  }
  SplitResult out;
  out.input_grads.resize(size_t(p));
  for (int s = p; s-- > 0;) {
    const auto dout = [&](int mb) { return s + 1 < p ? stages[s + 1]->input_grad(*caches[s + 1][mb]) : V2<const T>(); };
    if (split) {
      for (int mb = 0; mb < micro; ++mb) stages[s]->backward_input(ctx, scale, dout(mb), *caches[s][mb]);
      for (int mb = 0; mb < micro; ++mb) {
        std::vector<std::pair<int64_t, int64_t>> handed;
        stages[s]->backward_weight(ctx, *caches[s][mb], [&](int64_t o, int64_t c) { handed.push_back({o, o + c}); });
        CHECK(handed == stages[s]->grad_ready_order());
        const StageMemory memory = stages[s]->memory_for(ctx);
        CHECK(caches[s][mb]->bytes() == memory.cache + memory.weight_pass);
      }
    } else {
      for (int mb = 0; mb < micro; ++mb) stages[s]->backward(ctx, scale, dout(mb), *caches[s][mb]);
    }
    if (s > 0)
      for (int mb = 0; mb < micro; ++mb)
        for (double v : to_host<T>(stages[s]->input_grad(*caches[s][mb]))) out.input_grads[s].push_back(float(v));
  }
  for (auto& st : stages) {
    std::vector<float> g;
    for (double v : to_host<T>(st->params().grads())) g.push_back(float(v));
    out.grads.push_back(g);
  }
  return out;
}

template <class T>
void check_split_equals_fused(const std::function<StageList<T>()>& make, const SampleBatch<T>& batch) {
  for (int micro : {1, 2}) {
    StageList<T> a = make(), b = make();
    const SplitResult fused = run<T>(a, batch, micro, false), split = run<T>(b, batch, micro, true);
    INFO(a.size() << " stage(s), " << micro << " micro-batch(es)");
    for (size_t s = 0; s < a.size(); ++s) {
      CHECK(split.grads[s] == fused.grads[s]);
      CHECK(split.input_grads[s] == fused.input_grads[s]);
      double norm = 0;
      for (float g : fused.grads[s]) norm += double(g) * g;
      CHECK(norm > 0);  // every stage made gradients
    }
  }
}

// A small GPT and `samples` sequences of hashed tokens and targets.
ModelConfig small_gpt(int64_t n_layer) {
  ModelConfig cfg;
  cfg.n_layer = n_layer;
  cfg.n_embd = 16;
  cfg.n_head = 2;
  cfg.vocab_size = 13;
  cfg.seq_len = 6;
  cfg.init_std = 0.2;
  return cfg;
}
struct TokenBatch {
  Tensor1<int32_t> tokens, targets;
  SampleBatch<float> batch;
};
TokenBatch hashed_tokens(const ModelConfig& cfg, int64_t samples, uint64_t seed) {
  const int64_t n = samples * cfg.seq_len;
  TokenBatch t{Tensor1<int32_t>("tok", n), Tensor1<int32_t>("tgt", n), {}};
  auto ht = Kokkos::create_mirror_view(t.tokens), hg = Kokkos::create_mirror_view(t.targets);
  for (int64_t i = 0; i < n; ++i) {
    ht(i) = int32_t(counter_hash(seed, 2, i) % cfg.vocab_size);
    hg(i) = int32_t(counter_hash(seed, 3, i) % cfg.vocab_size);
  }
  Kokkos::deep_copy(t.tokens, ht);
  Kokkos::deep_copy(t.targets, hg);
  t.batch.samples = samples;
  t.batch.tokens = t.tokens;
  t.batch.targets = t.targets;
  return t;
}
}  // namespace

TEST_CASE("GPT: input half then weight half equals the fused backward bit for bit", "[model][split_backward]") {
  const ModelConfig cfg = small_gpt(4);
  const TokenBatch data = hashed_tokens(cfg, 4, 4);
  const SampleBatch<float>& b = data.batch;
  for (int p : {1, 2}) {
    check_split_equals_fused<float>(
        [&] {
          StageList<float> stages;
          for (int s = 0; s < p; ++s)
            stages.push_back(std::make_unique<GPT<float>>(cfg, 5, TensorParallel{}, StagePlacement::balanced(4, p, s)));
          return stages;
        },
        b);
  }
}

TEST_CASE("ResNet: input half then weight half equals the fused backward bit for bit",
          "[model][split_backward][resnet]") {
  for (int64_t channels : {int64_t(0), int64_t(2)}) {
    ResNetConfig cfg;
    cfg.inputs = 16;  // 4 x 4 images
    cfg.width = 6;
    cfg.channels = channels;
    cfg.steps = 4;
    cfg.classes = 3;
    const int64_t batch = 4;
    Tensor2<float> x("x", batch, cfg.inputs);
    Tensor1<int32_t> labels("labels", batch);
    auto hx = Kokkos::create_mirror_view(x);
    auto hl = Kokkos::create_mirror_view(labels);
    for (int64_t i = 0; i < batch; ++i) {
      for (int64_t q = 0; q < cfg.inputs; ++q) hx(i, q) = float(std::cos(0.7 * double(i * cfg.inputs + q)));
      hl(i) = int32_t(i % cfg.classes);
    }
    Kokkos::deep_copy(x, hx);
    Kokkos::deep_copy(labels, hl);
    SampleBatch<float> b;
    b.samples = batch;
    b.features = x;
    b.targets = labels;
    INFO("channels " << channels);
    for (int p : {1, 2}) {
      check_split_equals_fused<float>(
          [&] {
            StageList<float> stages;
            for (int s = 0; s < p; ++s)
              stages.push_back(std::make_unique<ResNet<float>>(cfg, 11, StagePlacement::balanced(4, p, s)));
            return stages;
          },
          b);
    }
  }
}

TEST_CASE("the backward's halves refuse recomputation", "[model][split_backward]") {
  ResNetConfig cfg;
  cfg.inputs = 4;
  cfg.width = 4;
  cfg.steps = 4;
  cfg.classes = 2;
  cfg.recompute_states = true;
  ResNet<float> net(cfg, 1);
  auto cache = net.make_cache();
  REQUIRE_THROWS_WITH(net.backward_input(net.context(1), 1.0f, {}, *cache), Catch::Contains("recompute"));
}

TEST_CASE("GPT last stage: one shared LM-head cache gives the same gradients", "[model][split_backward]") {
  // the order of a zero-bubble last stage (F0 I0 F1 I1 W0 W1) with one LM-head cache
  // shared by the micro-batches, against the fused backward with a head cache each
  const ModelConfig cfg = small_gpt(2);
  const int64_t bm = 2;
  const TokenBatch data = hashed_tokens(cfg, 2 * bm, 6);
  const SampleBatch<float>& b = data.batch;
  const BlockContext ctx{bm, cfg.seq_len};
  Tensor2<float> input("input", ctx.rows(), cfg.n_embd);  // what stage 0 would send
  auto hi = Kokkos::create_mirror_view(input);
  for (int64_t i = 0; i < ctx.rows(); ++i)
    for (int64_t j = 0; j < cfg.n_embd; ++j) hi(i, j) = float(std::sin(0.37 * double(i * cfg.n_embd + j)));
  Kokkos::deep_copy(input, hi);
  const auto part = [&](int mb) { return b.slice(mb * bm, (mb + 1) * bm, cfg.seq_len); };
  std::vector<std::vector<float>> grads;
  for (const bool shared : {false, true}) {
    GPT<float> last(cfg, 5, TensorParallel{}, StagePlacement::balanced(2, 2, 1));
    StageModel<float>& stage = last;
    stage.share_loss_layer_cache(shared);
    stage.params().zero_grads();
    std::vector<std::unique_ptr<StageCache>> caches;
    for (int mb = 0; mb < 2; ++mb) caches.push_back(stage.make_cache());
    for (int mb = 0; mb < 2; ++mb) {
      stage.forward(ctx, part(mb), input, *caches[size_t(mb)]);
      if (shared)
        stage.backward_input(ctx, 0.01f, {}, *caches[size_t(mb)]);
      else
        stage.backward(ctx, 0.01f, {}, *caches[size_t(mb)]);
    }
    if (shared)
      for (int mb = 0; mb < 2; ++mb) stage.backward_weight(ctx, *caches[size_t(mb)], {});
    const StageMemory memory = stage.memory_for(ctx, 0, shared);
    CHECK(caches[0]->bytes() == memory.cache);  // without the head's, when shared
    CHECK(stage.shared_cache_bytes() == memory.shared_cache);
    CHECK((stage.shared_cache_bytes() > 0) == shared);
    std::vector<float> g;
    for (double v : to_host<float>(stage.params().grads())) g.push_back(float(v));
    grads.push_back(g);
  }
  CHECK(grads[1] == grads[0]);
}

TEST_CASE("GPT: the fused backward hands its gradients in grad_ready_order, whole and finer units",
          "[model][split_backward][zero]") {
  ModelConfig cfg = small_gpt(4);
  cfg.moe_experts = 2;  // blocks 1 and 3 a mixture: their units read the experts' region too
  cfg.moe_every = 2;
  const TokenBatch data = hashed_tokens(cfg, 2, 8);
  const BlockContext ctx{2, cfg.seq_len};
  for (const Recompute recompute : {Recompute::None, Recompute::Full})
    for (const bool fine : {false, true}) {
      StageList<float> stages;
      for (int s = 0; s < 2; ++s) {
        auto gpt = std::make_unique<GPT<float>>(cfg, 5, TensorParallel{}, StagePlacement::balanced(4, 2, s), recompute);
        gpt->use_fine_units(fine, 1);
        REQUIRE(gpt->fine_units() == fine);
        stages.push_back(std::move(gpt));
      }
      std::vector<std::unique_ptr<StageCache>> caches;
      for (int s = 0; s < 2; ++s) {
        caches.push_back(stages[s]->make_cache());
        stages[s]->forward(ctx, data.batch, s == 0 ? V2<const float>() : stages[0]->output(*caches[0]), *caches[s]);
      }
      for (int s = 2; s-- > 0;) {
        std::vector<FlatRange> handed;
        stages[s]->backward(ctx, 0.1f, s == 1 ? V2<const float>() : stages[1]->input_grad(*caches[1]), *caches[s],
                            [&](int64_t o, int64_t c) {
                              handed.push_back({o, o + c});
                            });
        std::vector<FlatRange> order = stages[s]->grad_ready_order();
        // the head's chunks of the tied wte are named at once only where the gradients are
        // sharded (ZeRO-2/3), which this store is not
        const auto& wte = stages[s]->params().infos()[size_t(stages[s]->params().index("wte"))];
        while (s == 1 && fine && !order.empty() && order.front().second <= wte.offset + wte.numel &&
               order.front().first >= wte.offset)
          order.erase(order.begin());
        INFO("stage " << s << (fine ? ", finer units" : ", whole layers")
                      << (recompute == Recompute::Full ? ", full recomputation" : ""));
        CHECK(handed.size() > (fine ? 4u : 1u));
        CHECK(handed == order);
      }
    }
}
