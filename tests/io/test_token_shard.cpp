// Token shards (io/token_shard.hpp): strata's format written and read back (uint16 and
// uint32 tokens), llm.c's .bin format read from a hand-made file, and one-line refusals of
// a missing, foreign, truncated or padded file, an unknown version and an unknown width.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/token_shard.hpp"

using namespace strata;

namespace {
std::string shard_temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "strata_token_shard_test";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
void shard_write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}
std::vector<unsigned char> shard_read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void shard_put32(std::vector<unsigned char>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + size_t(i)] = static_cast<unsigned char>(v >> (8 * i));
}
}  // namespace

TEST_CASE("strata token shards round trip, in both widths", "[io][token_shard]") {
  const std::vector<uint32_t> tokens = {0, 1, 255, 256, 4095, 65535, 7};
  const std::string path = shard_temp_path("round.tok");
  write_token_shard(path, tokens, 2, 4096);
  const auto bytes = shard_read_bytes(path);
  REQUIRE(bytes.size() == 64 + 2 * tokens.size());
  CHECK(std::string(bytes.begin(), bytes.begin() + 8) == "STRATATK");
  CHECK(bytes[64] == 0);
  CHECK(bytes[64 + 2 * 3] == 0);  // 256, little-endian
  CHECK(bytes[64 + 2 * 3 + 1] == 1);
  {
    TokenShard shard(path);
    CHECK(shard.size() == int64_t(tokens.size()));
    CHECK(shard.width() == 2);
    CHECK(shard.vocab_size() == 4096);
    CHECK_FALSE(shard.llmc());
    for (size_t i = 0; i < tokens.size(); ++i) CHECK(shard.token(int64_t(i)) == tokens[i]);
  }
  const std::vector<uint32_t> wide = {70000, 3, 1u << 31};
  write_token_shard(path, wide, 4, 100000);
  TokenShard shard(path);
  CHECK(shard.width() == 4);
  for (size_t i = 0; i < wide.size(); ++i) CHECK(shard.token(int64_t(i)) == wide[i]);
  CHECK_THROWS_WITH(write_token_shard(path, wide, 2, 100000), Catch::Contains("does not fit a 2-byte shard"));
  CHECK(TokenShard(path).size() == 3);  // the failed write left the good file alone
}

TEST_CASE("llm.c token files are read as they are", "[io][token_shard]") {
  std::vector<unsigned char> b(1024 + 2 * 4, 0);
  shard_put32(b, 0, 20240520);
  shard_put32(b, 4, 1);
  shard_put32(b, 8, 4);
  const uint16_t tokens[4] = {50256, 15496, 11, 995};
  for (int i = 0; i < 4; ++i) {
    b[1024 + 2 * size_t(i)] = static_cast<unsigned char>(tokens[i] & 0xff);
    b[1024 + 2 * size_t(i) + 1] = static_cast<unsigned char>(tokens[i] >> 8);
  }
  const std::string path = shard_temp_path("llmc_train_000000.bin");
  shard_write_bytes(path, b);
  TokenShard shard(path);
  CHECK(shard.llmc());
  CHECK(shard.size() == 4);
  CHECK(shard.vocab_size() == 0);
  for (int i = 0; i < 4; ++i) CHECK(shard.token(i) == tokens[i]);
  b.resize(b.size() - 1);  // truncated
  shard_write_bytes(path, b);
  CHECK_THROWS_WITH(TokenShard(path),
                    Catch::Contains("header says 4 tokens (1032 bytes) but the file has 1031 bytes (truncated)"));
  b.resize(1032);
  shard_put32(b, 4, 2);  // a version this reader does not know
  shard_write_bytes(path, b);
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("llm.c token file version 2 is not 1"));
}

TEST_CASE("foreign, truncated and inconsistent shards are refused with one line", "[io][token_shard]") {
  const std::string path = shard_temp_path("bad.tok");
  CHECK_THROWS_AS(TokenShard(shard_temp_path("missing.tok")), UserError);
  shard_write_bytes(path, std::vector<unsigned char>(100, 'x'));
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("not a token shard"));
  shard_write_bytes(path, {});
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("not a token shard"));
  write_token_shard(path, {1, 2, 3}, 2, 10);
  auto good = shard_read_bytes(path);
  auto bytes = good;
  bytes.pop_back();
  shard_write_bytes(path, bytes);
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("(truncated)"));
  bytes = good;
  bytes.push_back(0);
  shard_write_bytes(path, bytes);
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("(trailing bytes)"));
  bytes = good;
  shard_put32(bytes, 8, 2);
  shard_write_bytes(path, bytes);
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("token shard version 2 is not one this strata reads"));
  bytes = good;
  shard_put32(bytes, 12, 3);
  shard_write_bytes(path, bytes);
  CHECK_THROWS_WITH(TokenShard(path), Catch::Contains("token width 3 bytes is neither 2 nor 4"));
}
