#pragma once
// Token shards: a corpus tokenized once, in files read by every job without loading them
// (memory-mapped), so the data need not fit in memory. strata writes its own format and
// reads llm.c's too.
//
// strata's format ("STRATATK", version 1), little-endian:
//   bytes  0-7   magic "STRATATK"
//   bytes  8-11  uint32 version (1)
//   bytes 12-15  uint32 token width in bytes (2: uint16 tokens, 4: uint32)
//   bytes 16-23  uint64 token count
//   bytes 24-31  uint64 vocabulary size of the tokenizer that wrote it
//   bytes 32-63  zero
//   then count tokens of the given width.
// llm.c's format (its data loaders' .bin files): 256 int32, [0] = 20240520, [1] = version
// (1: uint16 tokens), [2] = token count, the rest zero; then the uint16 tokens. Its
// vocabulary size is not recorded (0 here).
// Other formats map onto these by rewriting the header (a flat array of uint16 or uint32
// tokens needs only strata's 64 bytes in front).
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

class TokenShard {
 public:
  // Maps path and checks its header against its size. Throws UserError naming the file and
  // the cause: missing or unreadable, neither format's magic, an unknown version or token
  // width, fewer or more bytes than the header says.
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  int64_t size() const { return count_; }
  int64_t vocab_size() const { return vocab_; }  // 0 when the file does not say (llm.c)
  int width() const { return width_; }
  bool llmc() const { return llmc_; }
  uint32_t token(int64_t i) const;  // 0 <= i < size()
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;  // the mapping
  size_t bytes_ = 0;
  size_t header_ = 0;
  int64_t count_ = 0, vocab_ = 0;
  int width_ = 2;
  bool llmc_ = false;
};

// Writes tokens as a strata shard of `width` bytes per token (2 needs every token below
// 65536; UserError otherwise), written atomically (io/atomic_file.hpp: IoError naming the
// file when it cannot be written completely).
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, int width, int64_t vocab_size);

}  // namespace strata
