#include "cli/generate.hpp"
#include "model/model_kind.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "core/deck.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "data/deck_data.hpp"
#include "model/gpt.hpp"
#include "model/make_model.hpp"

namespace strata {

std::string generate_text(const std::string& checkpoint, const GenerateOptions& opts) {
  if (opts.tokens < 0) throw UserError("--tokens must be >= 0");
  if (opts.temperature < 0) throw UserError("--temperature must be >= 0");
  const Deck deck = parse_model_deck(CheckpointReader(checkpoint).string_attribute("deck"), checkpoint + " (its deck)",
                                     {}, KeyEffect::Ignore);
  const auto& m = deck.model;
  if (!is_gpt(m))
    throw UserError("strata generate: " + checkpoint + " holds a model of kind \"" + m.kind + "\", not a GPT");
  Deck whole = deck;  // one rank, the whole model, whatever layout wrote the checkpoint
  whole.parallel = Layout{};
  const auto made = as_gpt(make_model(whole));
  auto& model = *made;
  read_model_checkpoint(checkpoint, model.params());

  std::optional<Tokenizer> tokenizer;
  if (!opts.tokenizer.empty()) {
    Deck named = deck;
    named.data.tokenizer = opts.tokenizer;
    tokenizer = deck_tokenizer(named);
  } else if (const std::string carried = read_checkpoint_tokenizer(checkpoint); !carried.empty()) {
    tokenizer = Tokenizer::from_serialized(carried, checkpoint + " (its /tokenizer/model)");
  } else if (deck.data.kind == DataKind::Tokens) {
    tokenizer = deck_tokenizer(deck);
    if (!tokenizer)
      throw UserError(checkpoint + ": the model reads tokens and its deck names no tokenizer that exists here ('" +
                      tokenizer_path(deck.data) + "'): give one with --tokenizer FILE.model");
  }
  std::vector<int32_t> context;
  if (tokenizer) {
    for (uint32_t id : tokenizer->encode(opts.prompt)) context.push_back(int32_t(id));
    if (context.empty()) {
      const auto nl = tokenizer->encode("\n");
      context.push_back(nl.size() == 1 ? int32_t(nl[0]) : 0);
    }
  } else {
    for (unsigned char ch : opts.prompt) {
      if (int64_t(ch) >= m.vocab_size)
        throw UserError("the prompt has byte " + std::to_string(ch) + " outside the vocabulary");
      context.push_back(ch);
    }
    if (context.empty()) context.push_back(m.vocab_size > '\n' ? '\n' : 0);
  }

  std::vector<int32_t> out;
  std::vector<double> p(size_t(m.vocab_size));
  for (int64_t i = 0; i < opts.tokens; ++i) {
    // the last seq_len tokens are the window the model sees
    const int64_t t = std::min<int64_t>(int64_t(context.size()), m.seq_len);
    Tensor1<int32_t> tok("gen.tokens", t), dummy_targets("gen.targets", t);
    auto h = Kokkos::create_mirror_view(tok);
    for (int64_t j = 0; j < t; ++j) h(j) = context[context.size() - size_t(t) + size_t(j)];
    Kokkos::deep_copy(tok, h);
    model.forward(BlockContext{1, t}, tok, dummy_targets);
    // logits of the last position, to the host
    auto last = Kokkos::subview(model.logits(), t - 1, Kokkos::ALL());
    Kokkos::View<float*, Kokkos::HostSpace> hl("gen.logits", size_t(m.vocab_size));
    Kokkos::deep_copy(hl, last);
    int32_t next = 0;
    if (opts.temperature == 0) {
      next = int32_t(std::max_element(hl.data(), hl.data() + m.vocab_size) - hl.data());
    } else {
      const double mx = *std::max_element(hl.data(), hl.data() + m.vocab_size);
      double z = 0;
      for (int64_t v = 0; v < m.vocab_size; ++v) z += (p[size_t(v)] = std::exp((hl(v) - mx) / opts.temperature));
      double u = counter_uniform(opts.seed, 0x6E6E, uint64_t(i)) * z;
      next = int32_t(m.vocab_size - 1);
      for (int64_t v = 0; v < m.vocab_size; ++v)
        if ((u -= p[size_t(v)]) <= 0) {
          next = int32_t(v);
          break;
        }
    }
    out.push_back(next);
    context.push_back(next);
  }
  if (tokenizer) {
    // tokens the tokenizer does not have (a model padded past its vocabulary) are dropped
    std::vector<uint32_t> ids;
    for (int32_t t : out)
      if (t < tokenizer->vocab_size()) ids.push_back(uint32_t(t));
    return opts.prompt + tokenizer->decode(ids);
  }
  std::string text = opts.prompt;
  for (int32_t t : out) text += t < 256 ? std::string(1, char(t)) : "<" + std::to_string(t) + ">";
  return text;
}

}  // namespace strata
