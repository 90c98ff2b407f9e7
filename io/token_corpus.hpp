#pragma once
// A tokenized corpus in token shards (io/token_shard.hpp), read memory-mapped, so it need
// not fit in memory. Its train/validation split and sampler follow the byte-level text
// dataset's rules on tokens instead of bytes: the shards, in order, are cut into chunks of
// kChunkTokens (a shard's last chunk may be shorter); chunk c (numbered across all shards)
// goes to validation when counter_hash(0x5EED5A17, 0, c) % 10^6 < val_fraction 10^6; each
// split is the concatenation of its chunks, and sequence i of step s starts at
// counter_hash(seed ^ split, s, i) % (tokens - seq_len). So a sequence is a pure function
// of (seed, split, step, index) on any rank layout, crosses chunk and shard boundaries
// freely, and bytes written as one shard give exactly the text dataset's batches. With
// separate validation shards (llm.c's *_val_* files) the split is the files'.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/token_shard.hpp"
#include "io/token_source.hpp"

namespace strata {

class TokenCorpus : public TokenSource {
 public:
  static constexpr int64_t kChunkTokens = 4096;
  // shards (and val_shards, if any): paths or globs. Throws UserError (one line, naming
  // the file or key) when a pattern matches nothing, a shard is unreadable or malformed,
  // a shard's vocabulary exceeds model_vocab, or a split is shorter than seq_len + 1.
  TokenCorpus(const std::vector<std::string>& shards, const std::vector<std::string>& val_shards, double val_fraction,
              int64_t seq_len, uint64_t seed, int64_t model_vocab);

  // The tokenizer the shards were written with (named in describe()) and the bytes of text
  // each token id stands for (Tokenizer::text_bytes), for bits per byte.
  void set_tokenizer(const std::string& name, std::vector<uint8_t> bytes_per_token) {
    tokenizer_ = name;
    text_bytes_ = std::move(bytes_per_token);
  }

  // Throws UserError naming the shard and position when a token is not below model_vocab
  // (llm.c's files do not record their vocabulary).
  void sequence(Split split, int64_t step, int64_t global_index, int64_t seq_len, int32_t* tokens,
                int32_t* targets) const override;
  std::string describe() const override;
  double text_bytes(const int32_t* tokens, int64_t n) const override;

  int64_t tokens(Split split) const { return part(split).tokens; }
  const std::vector<std::unique_ptr<TokenShard>>& shards() const { return shards_; }

 private:
  // A run of consecutive tokens of one shard in a split, at `start` in the split.
  struct Piece {
    uint32_t shard;
    uint64_t offset, start;
  };
  struct Part {
    std::vector<Piece> pieces;
    int64_t tokens = 0;
  };
  const Part& part(Split split) const { return split == Split::Train ? train_ : val_; }
  void add(Part& part, uint32_t shard, uint64_t offset, uint64_t count);

  std::vector<std::unique_ptr<TokenShard>> shards_;
  Part train_, val_;
  uint64_t seed_;
  int64_t model_vocab_;
  bool separate_val_ = false;
  std::string tokenizer_;
  std::vector<uint8_t> text_bytes_;
};

}  // namespace strata
