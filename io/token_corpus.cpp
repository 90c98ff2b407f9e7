#include "io/token_corpus.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/file_globs.hpp"

namespace strata {

void TokenCorpus::add(Part& p, uint32_t shard, uint64_t offset, uint64_t count) {
  if (count == 0) return;
  // a chunk that continues the previous piece's run of the same shard extends it
  if (!p.pieces.empty()) {
    const Piece& last = p.pieces.back();
    if (last.shard == shard && last.offset + (uint64_t(p.tokens) - last.start) == offset) {
      p.tokens += int64_t(count);
      return;
    }
  }
  p.pieces.push_back({shard, offset, uint64_t(p.tokens)});
  p.tokens += int64_t(count);
}

TokenCorpus::TokenCorpus(const std::vector<std::string>& shards, const std::vector<std::string>& val_shards,
                         double val_fraction, int64_t seq_len, uint64_t seed, int64_t model_vocab)
    : seed_(seed), model_vocab_(model_vocab), separate_val_(!val_shards.empty()) {
  const auto open_all = [&](const std::vector<std::string>& patterns, const std::string& key) {
    const size_t first = shards_.size();
    for (const auto& path : expand_globs(patterns, key, "token shard")) {
      shards_.push_back(std::make_unique<TokenShard>(path));
      const TokenShard& s = *shards_.back();
      if (s.vocab_size() > model_vocab)
        throw UserError(path + ": its tokens come from a vocabulary of " + std::to_string(s.vocab_size()) +
                        ", larger than model.vocab_size = " + std::to_string(model_vocab));
    }
    return std::make_pair(first, shards_.size());
  };
  const auto [t0, t1] = open_all(shards, "data.shards");
  if (separate_val_) {
    for (size_t i = t0; i < t1; ++i) add(train_, uint32_t(i), 0, uint64_t(shards_[i]->size()));
    const auto [v0, v1] = open_all(val_shards, "data.val_shards");
    for (size_t i = v0; i < v1; ++i) add(val_, uint32_t(i), 0, uint64_t(shards_[i]->size()));
  } else {
    const uint64_t threshold = uint64_t(val_fraction * 1e6);
    uint64_t chunk = 0;
    for (size_t i = t0; i < t1; ++i)
      for (int64_t off = 0; off < shards_[i]->size(); off += kChunkTokens, ++chunk) {
        const int64_t n = std::min(kChunkTokens, shards_[i]->size() - off);
        add((counter_hash(0x5EED5A17u, 0, chunk) % 1000000) < threshold ? val_ : train_, uint32_t(i), uint64_t(off),
            uint64_t(n));
      }
  }
  const int64_t need = seq_len + 1;
  if (train_.tokens < need || val_.tokens < need)
    throw UserError("data: " + std::to_string(train_.tokens + val_.tokens) + " tokens in " +
                    std::to_string(shards_.size()) + " shards give a train/validation split of " +
                    std::to_string(train_.tokens) + "/" + std::to_string(val_.tokens) +
                    " tokens; each needs at least model.seq_len + 1 = " + std::to_string(need));
}

void TokenCorpus::sequence(Split split, int64_t step, int64_t global_index, int64_t seq_len, int32_t* tokens,
                           int32_t* targets) const {
  const Part& p = part(split);
  const uint64_t span = uint64_t(p.tokens - seq_len);  // valid starts: [0, span)
  const uint64_t start = counter_hash(seed_ ^ uint64_t(split), uint64_t(step), uint64_t(global_index)) % span;
  auto it = std::upper_bound(p.pieces.begin(), p.pieces.end(), start,
                             [](uint64_t pos, const Piece& piece) { return pos < piece.start; }) -
            1;
  for (int64_t t = 0; t <= seq_len; ++t) {
    const uint64_t pos = start + uint64_t(t);
    const uint64_t end = (it + 1 == p.pieces.end()) ? uint64_t(p.tokens) : (it + 1)->start;
    if (pos >= end) ++it;
    const TokenShard& s = *shards_[it->shard];
    const int64_t at = int64_t(it->offset + (pos - it->start));
    const uint32_t tok = s.token(at);
    if (int64_t(tok) >= model_vocab_)
      throw UserError(s.path() + ": token " + std::to_string(tok) + " at position " + std::to_string(at) +
                      " is outside model.vocab_size = " + std::to_string(model_vocab_));
    if (t < seq_len) tokens[t] = int32_t(tok);
    if (t > 0) targets[t - 1] = int32_t(tok);
  }
}

double TokenCorpus::text_bytes(const int32_t* tokens, int64_t n) const {
  if (text_bytes_.empty()) return std::nan("");
  double bytes = 0;
  for (int64_t i = 0; i < n; ++i)
    bytes += size_t(tokens[i]) < text_bytes_.size() ? double(text_bytes_[size_t(tokens[i])]) : 0.0;
  return bytes;
}

std::string TokenCorpus::describe() const {
  return std::to_string(shards_.size()) + " token shards, " + std::to_string(train_.tokens) + " train / " +
         std::to_string(val_.tokens) + " validation tokens" +
         (separate_val_ ? " (validation from data.val_shards)" : "") +
         (tokenizer_.empty() ? "; no tokenizer (no bits per byte)"
                             : "; tokenizer " + tokenizer_ + " (" + std::to_string(text_bytes_.size()) + " pieces)");
}

}  // namespace strata
