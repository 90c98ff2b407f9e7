// Writes what strata computes for a tiny GPT in double precision, for the PyTorch
// cross-check (check_against_torch.py): initial parameters, the first step's loss and
// gradients, and the parameters after K AdamW steps with warmup/cosine and clipping.
// Usage: dump_gpt_steps OUTDIR
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/deck.hpp"
#include "core/deck_reading.hpp"
#include "data/token_batches.hpp"
#include "io/random_tokens.hpp"
#include "model/gpt.hpp"
#include "model/model_kind.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_clip.hpp"

using namespace strata;

static void write_bin(const std::string& path, const Tensor1<double>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(h.data()), h.size() * sizeof(double));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dump_gpt_steps OUTDIR\n");
    return 2;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  const std::string out = argv[1];
  const Deck deck = parse_model_deck(R"(
[run]
steps = 4
seed = 5
[model]
n_layer = 2
n_embd = 16
n_head = 2
vocab_size = 37
seq_len = 8
init_std = 0.2
[data]
kind = "random"
batch_size = 3
[optim]
lr = 1e-2
min_lr = 1e-3
warmup_steps = 2
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
grad_clip = 0.5
)",
                                     "reference deck");
  const auto& m = deck.model;
  GPT<double> model(m, deck.run.seed);
  auto& store = model.params();
  const BlockContext ctx{deck.data.batch_size, m.seq_len};
  TokenBatches batches(std::make_shared<RandomTokens>(m.vocab_size, deck.run.seed), BatchShape{ctx.batch}, ctx.seq_len);
  AdamW<double> optim(deck.optim);

  write_bin(out + "/init.bin", store.params());
  std::ofstream meta(out + "/meta.json");
  meta.precision(17);
  meta << "{\"n_layer\": " << m.n_layer << ", \"n_embd\": " << m.n_embd << ", \"n_head\": " << m.n_head
       << ", \"vocab_size\": " << m.vocab_size << ", \"seq_len\": " << m.seq_len << ", \"batch\": " << ctx.batch
       << ", \"weight_decay\": " << deck.optim.weight_decay << ", \"beta1\": " << deck.optim.beta1
       << ", \"beta2\": " << deck.optim.beta2 << ", \"eps\": " << deck.optim.eps
       << ", \"grad_clip\": " << deck.optim.grad_clip << ",\n \"params\": [";
  for (size_t i = 0; i < store.infos().size(); ++i) {
    const auto& p = store.infos()[i];
    meta << (i ? ", " : "") << "{\"name\": \"" << p.name << "\", \"offset\": " << p.offset << ", \"shape\": [";
    for (size_t d = 0; d < p.shape.size(); ++d) meta << (d ? ", " : "") << p.shape[d];
    meta << "]}";
  }
  meta << "],\n \"steps\": [";
  for (int64_t s = 0; s < deck.run.steps; ++s) {
    const SampleBatch<float> batch = batches.load(Split::Train, s, 0);
    store.zero_grads();
    const double n = double(ctx.rows());
    const double loss = model.forward(ctx, batch.tokens, batch.targets) / n;
    model.backward(ctx, 1.0 / n);
    if (s == 0) write_bin(out + "/grads0.bin", store.grads());
    const double norm = clip_grad_norm<double>(store, nullptr, deck.optim.grad_clip);
    const double lr = lr_at_step(deck.optim, s, deck.run.steps);
    optim.step(store, lr);
    auto tok = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), batch.tokens);
    auto tgt = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), batch.targets);
    meta << (s ? ",\n  " : "") << "{\"loss\": " << loss << ", \"grad_norm\": " << norm << ", \"lr\": " << lr
         << ", \"tokens\": [";
    for (size_t i = 0; i < tok.size(); ++i) meta << (i ? ", " : "") << tok(i);
    meta << "], \"targets\": [";
    for (size_t i = 0; i < tgt.size(); ++i) meta << (i ? ", " : "") << tgt(i);
    meta << "]}";
  }
  meta << "]}\n";
  write_bin(out + "/final.bin", store.params());
  return 0;
}
