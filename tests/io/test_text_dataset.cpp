// The byte-level dataset: glob expansion, a deterministic split, a sampler that is a pure
// function of (split, step, index), and clear errors for missing or short data.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"
#include "io/random_tokens.hpp"
#include "io/text_dataset.hpp"

using namespace strata;

TEST_CASE("fortunes glob skips .dat/.u8 and the split is deterministic", "[io][text]") {
  TextDataset a({"/usr/share/games/fortunes/*"}, 0.05, 64, 1);
  TextDataset b({"/usr/share/games/fortunes/*"}, 0.05, 64, 1);
  for (const auto& f : a.files()) {
    REQUIRE(f.substr(f.size() - 4) != ".dat");
    REQUIRE(f.substr(f.size() - 3) != ".u8");
  }
  REQUIRE(a.train_bytes() == b.train_bytes());
  const double frac = double(a.val_bytes()) / double(a.train_bytes() + a.val_bytes());
  REQUIRE(frac > 0.02);
  REQUIRE(frac < 0.10);

  std::vector<int32_t> t1(64), g1(64), t2(64), g2(64);
  a.sequence(Split::Train, 5, 3, 64, t1.data(), g1.data());
  b.sequence(Split::Train, 5, 3, 64, t2.data(), g2.data());
  REQUIRE(t1 == t2);
  for (int i = 0; i + 1 < 64; ++i) REQUIRE(g1[i] == t1[i + 1]);  // targets are the next bytes
  a.sequence(Split::Train, 6, 3, 64, t2.data(), g2.data());
  REQUIRE(t1 != t2);  // another step draws another window
}

TEST_CASE("random tokens are a pure function of (step, index) within the vocabulary", "[io][random]") {
  RandomTokens r(50, 7);
  std::vector<int32_t> t1(16), g1(16), t2(16), g2(16);
  r.sequence(Split::Train, 2, 9, 16, t1.data(), g1.data());
  r.sequence(Split::Train, 2, 9, 16, t2.data(), g2.data());
  REQUIRE(t1 == t2);
  for (int i = 0; i < 16; ++i) REQUIRE((t1[i] >= 0 && t1[i] < 50));
  for (int i = 0; i + 1 < 16; ++i) REQUIRE(g1[i] == t1[i + 1]);
}

TEST_CASE("missing and too-short text data are user errors", "[io][text]") {
  REQUIRE_THROWS_WITH(TextDataset({"/nonexistent/dir/*.txt"}, 0.1, 8, 1),
                      "data.files: '/nonexistent/dir/*.txt' matches no readable text file");
  const std::string path = "strata_test_short.txt";
  std::ofstream(path) << "tiny";
  REQUIRE_THROWS_WITH(TextDataset({path}, 0.1, 8, 1), Catch::Contains("each needs at least model.seq_len + 1 = 9"));
  std::remove(path.c_str());
}
