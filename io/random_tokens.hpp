#pragma once
// Uniform random tokens over the vocabulary, for benchmarks: the same counter-based rule as
// the text sampler, so any layout sees the same global batches.
#include "core/rng.hpp"
#include "io/token_source.hpp"

namespace strata {

class RandomTokens : public TokenSource {
 public:
  RandomTokens(int64_t vocab, uint64_t seed) : vocab_(vocab), seed_(seed) {}
  void sequence(Split split, int64_t step, int64_t global_index, int64_t seq_len, int32_t* tokens,
                int32_t* targets) const override {
    auto tok = [&](int64_t t) {
      return int32_t(counter_hash(seed_ ^ uint64_t(split), uint64_t(step), uint64_t(global_index * (seq_len + 1) + t)) %
                     uint64_t(vocab_));
    };
    for (int64_t t = 0; t < seq_len; ++t) {
      tokens[t] = tok(t);
      targets[t] = tok(t + 1);
    }
  }

 private:
  int64_t vocab_;
  uint64_t seed_;
};

}  // namespace strata
