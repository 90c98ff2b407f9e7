// Token shards as training data (io/token_corpus.hpp): the corpus's split and sampler are
// the byte-level text dataset's on tokens, so the bytes of fortunes written as one shard
// give exactly its sequences; the same tokens cut into several shards at chunk multiples
// give the same sequences (sequences cross shard boundaries); the sampler is a pure
// function of (split, step, index), so any data-parallel layout loads the same global
// batch; separate validation shards; and one-line refusals (no shards, a vocabulary larger
// than the model's, a token outside it in an llm.c file, a split too short).
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/token_batches.hpp"
#include "io/text_dataset.hpp"
#include "io/token_corpus.hpp"
#include "io/token_shard.hpp"

using namespace strata;

namespace {
std::string corpus_temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "strata_token_corpus_test" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}
std::vector<uint32_t> corpus_fortune_bytes() {
  std::vector<uint32_t> out;
  for (const auto& f : TextDataset::expand({"/usr/share/games/fortunes/*"})) {
    std::ifstream in(f, std::ios::binary);
    for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) out.push_back(uint32_t(uint8_t(*it)));
  }
  return out;
}
// cuts tokens into shards after each of `cuts` tokens
void corpus_write_shards(const std::string& dir, const std::vector<uint32_t>& tokens, const std::vector<size_t>& cuts,
                         int width = 2) {
  size_t begin = 0;
  for (size_t k = 0; k <= cuts.size(); ++k) {
    const size_t end = k < cuts.size() ? cuts[k] : tokens.size();
    const std::vector<uint32_t> part(tokens.begin() + long(begin), tokens.begin() + long(end));
    char name[32];
    std::snprintf(name, sizeof(name), "/shard_%06zu.tok", k);
    write_token_shard(dir + name, part, width, 256);
    begin = end;
  }
}
}  // namespace

TEST_CASE("bytes as one token shard give the text dataset's split and sequences", "[io][token_corpus]") {
  const std::string dir = corpus_temp_dir("one");
  corpus_write_shards(dir, corpus_fortune_bytes(), {});
  const TextDataset text({"/usr/share/games/fortunes/*"}, 0.05, 64, 1337);
  const TokenCorpus corpus({dir + "/*.tok"}, {}, 0.05, 64, 1337, 256);
  REQUIRE(corpus.tokens(Split::Train) == text.train_bytes());
  REQUIRE(corpus.tokens(Split::Validation) == text.val_bytes());
  std::vector<int32_t> a(64), ga(64), b(64), gb(64);
  for (Split split : {Split::Train, Split::Validation})
    for (int64_t step = 0; step < 20; ++step)
      for (int64_t i = 0; i < 8; ++i) {
        text.sequence(split, step, i, 64, a.data(), ga.data());
        corpus.sequence(split, step, i, 64, b.data(), gb.data());
        REQUIRE(a == b);
        REQUIRE(ga == gb);
      }
  CHECK(corpus.text_bytes(b.data(), 64) != corpus.text_bytes(b.data(), 64));  // NaN: no tokenizer given
}

TEST_CASE("the same tokens in many shards give the same sequences, across shard boundaries", "[io][token_corpus]") {
  const auto bytes = corpus_fortune_bytes();
  const std::string one = corpus_temp_dir("whole"), many = corpus_temp_dir("cut");
  corpus_write_shards(one, bytes, {});
  // cuts at chunk multiples (4096 tokens): the chunks, hence the split, are unchanged;
  // the second shard is one chunk long, the last shorter than a chunk, uint32 tokens
  const size_t c = size_t(TokenCorpus::kChunkTokens);
  const size_t last = (bytes.size() / c) * c;
  corpus_write_shards(many, bytes, {100 * c, 101 * c, 350 * c, last}, 4);
  const TokenCorpus a({one + "/*.tok"}, {}, 0.05, 256, 7, 256);
  const TokenCorpus b({many + "/*.tok"}, {}, 0.05, 256, 7, 256);
  REQUIRE(b.shards().size() == 5);
  REQUIRE(a.tokens(Split::Train) == b.tokens(Split::Train));
  std::vector<int32_t> x(256), gx(256), y(256), gy(256);
  int64_t crossed = 0;
  for (Split split : {Split::Train, Split::Validation})
    for (int64_t step = 0; step < 200; ++step)
      for (int64_t i = 0; i < 16; ++i) {
        a.sequence(split, step, i, 256, x.data(), gx.data());
        b.sequence(split, step, i, 256, y.data(), gy.data());
        REQUIRE(x == y);
        REQUIRE(gx == gy);
        for (int t = 0; t + 1 < 256; ++t) REQUIRE(gx[size_t(t)] == x[size_t(t) + 1]);
      }
  // and at least some of those windows straddled a shard boundary: the split positions of
  // the cuts are covered by windows drawn above (checked by brute force on the train split)
  for (int64_t step = 0; step < 200; ++step)
    for (int64_t i = 0; i < 16; ++i) {
      b.sequence(Split::Train, step, i, 256, y.data(), gy.data());
      // a window that contains the first token of shard 1 preceded by the last of shard 0
      for (int t = 0; t + 1 < 256; ++t)
        crossed +=
            (uint32_t(y[size_t(t)]) == bytes[100 * c - 1] && uint32_t(y[size_t(t) + 1]) == bytes[100 * c]) ? 1 : 0;
    }
  CHECK(crossed > 0);
}

TEST_CASE("a global batch is the same on any data-parallel layout", "[io][token_corpus]") {
  const std::string dir = corpus_temp_dir("layout");
  corpus_write_shards(dir, corpus_fortune_bytes(), {200000, 900000});
  const auto corpus = std::make_shared<TokenCorpus>(std::vector<std::string>{dir + "/*.tok"},
                                                    std::vector<std::string>{}, 0.05, 32, 3, 256);
  const int64_t global = 8, micro = 2;
  TokenBatches whole(corpus, BatchShape{global, 1, 0, micro}, 32);
  auto all = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), whole.load(Split::Train, 11, 0).tokens);
  for (int64_t replicas : {2, 4}) {
    // replica r's micro-batch j holds its part of global micro-batch j
    for (int64_t r = 0; r < replicas; ++r) {
      TokenBatches part(corpus, BatchShape{global, replicas, r, micro}, 32);
      auto mine = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), part.load(Split::Train, 11, 0).tokens);
      const int64_t per_micro = global / replicas / micro;
      for (int64_t i = 0; i < global / replicas; ++i) {
        const int64_t g = (i / per_micro) * per_micro * replicas + r * per_micro + i % per_micro;
        for (int64_t t = 0; t < 32; ++t) REQUIRE(mine(i * 32 + t) == all(g * 32 + t));
      }
    }
  }
}

TEST_CASE("validation shards of their own, and refusals in one line", "[io][token_corpus]") {
  const std::string dir = corpus_temp_dir("errors");
  std::vector<uint32_t> train(5000), val(700);
  for (size_t i = 0; i < train.size(); ++i) train[i] = uint32_t(i % 500);
  for (size_t i = 0; i < val.size(); ++i) val[i] = uint32_t(1000 + i % 7);
  write_token_shard(dir + "/train.tok", train, 2, 1024);
  write_token_shard(dir + "/val.tok", val, 2, 1024);
  const TokenCorpus c({dir + "/train.tok"}, {dir + "/val.tok"}, 0.05, 16, 1, 1024);
  CHECK(c.tokens(Split::Train) == 5000);
  CHECK(c.tokens(Split::Validation) == 700);
  std::vector<int32_t> t(16), g(16);
  c.sequence(Split::Validation, 3, 2, 16, t.data(), g.data());
  for (int32_t v : t) CHECK((v >= 1000 && v < 1007));
  CHECK(
      c.describe() ==
      "2 token shards, 5000 train / 700 validation tokens (validation from data.val_shards); no tokenizer (no bits per "
      "byte)");

  CHECK_THROWS_WITH(TokenCorpus({dir + "/none_*.tok"}, {}, 0.05, 16, 1, 1024),
                    "data.shards: '" + dir + "/none_*.tok' matches no readable token shard");
  CHECK_THROWS_WITH(TokenCorpus({dir + "/train.tok"}, {}, 0.05, 16, 1, 512),
                    dir + "/train.tok: its tokens come from a vocabulary of 1024, larger than model.vocab_size = 512");
  CHECK_THROWS_WITH(TokenCorpus({dir + "/val.tok"}, {}, 0.05, 16, 1, 1024),
                    Catch::Contains("give a train/validation split of") &&
                        Catch::Contains("each needs at least model.seq_len + 1 = 17"));
  // llm.c's files record no vocabulary: a token outside the model's is caught when read
  std::vector<unsigned char> llmc(1024 + 2 * 3000, 0);
  const uint32_t head[3] = {20240520u, 1u, 3000u};
  for (int k = 0; k < 3; ++k)
    for (int b = 0; b < 4; ++b) llmc[size_t(4 * k + b)] = static_cast<unsigned char>(head[k] >> (8 * b));
  for (size_t i = 0; i < 3000; ++i) llmc[1024 + 2 * i] = static_cast<unsigned char>(i % 200);
  llmc[1024 + 2 * 1500 + 1] = 0x10;  // token 1500 becomes 4096 + (1500 % 200)
  std::ofstream(dir + "/llmc_train.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(llmc.data()), std::streamsize(llmc.size()));
  write_token_shard(dir + "/val_long.tok", std::vector<uint32_t>(3000, 5), 2, 1024);
  const TokenCorpus l({dir + "/llmc_train.bin"}, {dir + "/val_long.tok"}, 0.05, 2999, 1, 1024);
  CHECK_THROWS_WITH(
      l.sequence(Split::Train, 0, 0, 2999, std::vector<int32_t>(2999).data(), std::vector<int32_t>(2999).data()),
      dir + "/llmc_train.bin: token 4196 at position 1500 is outside model.vocab_size = 1024");
}
