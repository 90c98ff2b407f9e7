#include "data/deck_data.hpp"

#include <sys/stat.h>

#include "core/error.hpp"
#include "data/image_batches.hpp"
#include "data/token_batches.hpp"
#include "io/random_tokens.hpp"
#include "io/text_dataset.hpp"
#include "io/token_corpus.hpp"

namespace strata {

std::string tokenizer_path(const DataConfig& data) {
  if (!data.tokenizer.empty()) return data.tokenizer;
  return data.token_dir.empty() ? "" : data.token_dir + "/tokenizer.model";
}

std::vector<std::string> shard_patterns(const DataConfig& data) {
  if (!data.shards.empty()) return data.shards;
  return {data.token_dir + "/shard_*.tok"};
}

std::optional<Tokenizer> deck_tokenizer(const Deck& deck) {
  const std::string path = tokenizer_path(deck.data);
  struct stat st {};
  if (path.empty() || (deck.data.tokenizer.empty() && ::stat(path.c_str(), &st) != 0)) return std::nullopt;
  Tokenizer t = Tokenizer::load(path);
  if (t.vocab_size() > deck.model.vocab_size)
    throw UserError(path + ": the tokenizer has " + std::to_string(t.vocab_size()) +
                    " pieces, more than model.vocab_size = " + std::to_string(deck.model.vocab_size));
  return t;
}

std::unique_ptr<TokenSource> make_token_source(const Deck& deck) {
  const auto& d = deck.data;
  const auto& m = deck.model;
  if (d.kind == DataKind::Text) return std::make_unique<TextDataset>(d.files, d.val_fraction, m.seq_len, deck.run.seed);
  if (d.kind != DataKind::Tokens) return std::make_unique<RandomTokens>(m.vocab_size, deck.run.seed);
  auto corpus = std::make_unique<TokenCorpus>(shard_patterns(d), d.val_shards, d.val_fraction, m.seq_len, deck.run.seed,
                                              m.vocab_size);
  if (auto tok = deck_tokenizer(deck)) {
    for (const auto& s : corpus->shards())
      if (s->vocab_size() != 0 && s->vocab_size() != tok->vocab_size())
        throw UserError(s->path() + ": written with a vocabulary of " + std::to_string(s->vocab_size()) +
                        " tokens, but the tokenizer " + tokenizer_path(d) + " has " +
                        std::to_string(tok->vocab_size()) + ": shards and tokenizer do not belong together");
    corpus->set_tokenizer(tokenizer_path(d), tok->text_bytes());
  }
  return corpus;
}

std::unique_ptr<BatchSource> make_batch_source(const Deck& deck, const Grid& grid) {
  BatchShape shape;
  shape.global_batch = deck.data.batch_size;
  shape.replicas = grid.data_size();
  shape.replica = grid.data_rank();
  shape.micro_batches = deck.parallel.micro_batches;
  if (deck.data.kind == DataKind::Images)
    return std::make_unique<ImageBatches>(std::make_unique<ImageDataset>(deck.data.dir, deck.run.seed), shape,
                                          deck.data.dir);
  return std::make_unique<TokenBatches>(make_token_source(deck), shape, deck.model.seq_len);
}

}  // namespace strata
