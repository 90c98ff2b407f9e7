#include "io/token_shard.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/file_descriptor.hpp"

namespace strata {
namespace {
constexpr char kShardMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'T', 'K'};
constexpr size_t kShardHeader = 64;
constexpr int32_t kLlmcShardMagic = 20240520;
constexpr size_t kLlmcShardHeader = 256 * sizeof(int32_t);

template <class U>
U shard_read_le(const unsigned char* p) {
  U v = 0;
  for (size_t i = 0; i < sizeof(U); ++i) v |= U(p[i]) << (8 * i);
  return v;
}
template <class U>
void shard_write_le(unsigned char* p, U v) {
  for (size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xff);
}
}  // namespace

TokenShard::TokenShard(const std::string& path) : path_(path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY));
  if (!fd.is_open()) throw UserError(path + ": cannot open token shard: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw UserError(path + ": cannot stat token shard: " + std::strerror(errno));
  bytes_ = size_t(st.st_size);
  if (bytes_ > 0) {
    void* map = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (map == MAP_FAILED) throw UserError(path + ": cannot map token shard: " + std::strerror(errno));
    data_ = static_cast<const unsigned char*>(map);
  }
  fd.close();  // the mapping stays
  const auto fail = [&](const std::string& why) {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), bytes_);
    data_ = nullptr;
    throw UserError(path + ": " + why);
  };
  uint64_t count = 0;
  if (bytes_ >= kShardHeader && std::memcmp(data_, kShardMagic, sizeof(kShardMagic)) == 0) {
    const uint32_t version = shard_read_le<uint32_t>(data_ + 8);
    if (version != 1) fail("token shard version " + std::to_string(version) + " is not one this strata reads (1)");
    const uint32_t width = shard_read_le<uint32_t>(data_ + 12);
    if (width != 2 && width != 4) fail("token width " + std::to_string(width) + " bytes is neither 2 nor 4");
    width_ = int(width);
    count = shard_read_le<uint64_t>(data_ + 16);
    vocab_ = int64_t(shard_read_le<uint64_t>(data_ + 24));
    header_ = kShardHeader;
  } else if (bytes_ >= kLlmcShardHeader && shard_read_le<uint32_t>(data_) == uint32_t(kLlmcShardMagic)) {
    const uint32_t version = shard_read_le<uint32_t>(data_ + 4);
    if (version != 1) fail("llm.c token file version " + std::to_string(version) + " is not 1 (uint16 tokens)");
    llmc_ = true;
    width_ = 2;
    count = shard_read_le<uint32_t>(data_ + 8);
    header_ = kLlmcShardHeader;
  } else {
    fail("not a token shard (neither strata's \"STRATATK\" header nor llm.c's magic 20240520)");
  }
  const uint64_t expected = uint64_t(header_) + count * uint64_t(width_);
  if (count > (uint64_t(1) << 56) || expected != bytes_)
    fail("the header says " + std::to_string(count) + " tokens (" + std::to_string(expected) +
         " bytes) but the file has " + std::to_string(bytes_) + " bytes (" +
         (bytes_ < expected ? "truncated" : "trailing bytes") + ")");
  count_ = int64_t(count);
}

TokenShard::~TokenShard() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), bytes_);
}

uint32_t TokenShard::token(int64_t i) const {
  const unsigned char* p = data_ + header_ + size_t(i) * size_t(width_);
  return width_ == 2 ? uint32_t(shard_read_le<uint16_t>(p)) : shard_read_le<uint32_t>(p);
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, int width, int64_t vocab_size) {
  if (width != 2 && width != 4) throw std::invalid_argument("write_token_shard: width must be 2 or 4");
  std::vector<unsigned char> out(kShardHeader + tokens.size() * size_t(width), 0);
  std::memcpy(out.data(), kShardMagic, sizeof(kShardMagic));
  shard_write_le<uint32_t>(out.data() + 8, 1);
  shard_write_le<uint32_t>(out.data() + 12, uint32_t(width));
  shard_write_le<uint64_t>(out.data() + 16, tokens.size());
  shard_write_le<uint64_t>(out.data() + 24, uint64_t(vocab_size));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (width == 2 && tokens[i] > 0xffff)
      throw UserError(path + ": token " + std::to_string(tokens[i]) + " does not fit a 2-byte shard");
    unsigned char* p = out.data() + kShardHeader + i * size_t(width);
    if (width == 2)
      shard_write_le<uint16_t>(p, uint16_t(tokens[i]));
    else
      shard_write_le<uint32_t>(p, tokens[i]);
  }
  write_file_atomically(path, out.data(), out.size());
}

}  // namespace strata
