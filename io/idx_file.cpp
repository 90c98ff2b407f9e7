#include "io/idx_file.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <climits>

#include "core/error.hpp"

namespace strata {
namespace {

// A gzip or plain file (gzread passes plain files through), read in pieces straight into
// the caller's memory: the elements are inflated once, into their array, never copied.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (!f_) throw UserError("cannot open IDX file '" + path + "'");
  }
  ~GzFile() { gzclose(f_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Up to n bytes; fewer only at the end of the data.
  size_t read(uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const int k = gzread(f_, dst + got, unsigned(std::min<size_t>(n - got, INT_MAX / 2)));
      if (k < 0) fail();
      if (k == 0) break;
      got += size_t(k);
    }
    int err = Z_OK;
    gzerror(f_, &err);
    if (err != Z_OK && err != Z_STREAM_END) fail();
    return got;
  }

 private:
  [[noreturn]] void fail() {
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    throw UserError("IDX file '" + path_ + "': " + std::string(msg && *msg ? msg : "read error") +
                    " (corrupt or truncated gzip?)");
  }
  std::string path_;
  gzFile f_;
};

}  // namespace

IdxArray read_idx(const std::string& path, int rank) {
  GzFile in(path);
  const auto fail = [&](const std::string& why) -> UserError { return UserError("IDX file '" + path + "': " + why); };
  uint8_t magic[4];
  if (in.read(magic, 4) < 4) throw fail("shorter than its 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0) throw fail("bad magic number (not an IDX file)");
  if (magic[2] != 0x08) throw fail("element type " + std::to_string(int(magic[2])) + ", expected 8 (unsigned byte)");
  if (int(magic[3]) != rank)
    throw fail(std::to_string(int(magic[3])) + " dimensions, expected " + std::to_string(rank));
  std::vector<uint8_t> header(4 * size_t(rank));
  if (in.read(header.data(), header.size()) < header.size()) throw fail("header truncated");
  IdxArray a;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = header.data() + 4 * d;
    const int64_t dim = (int64_t(p[0]) << 24) | (int64_t(p[1]) << 16) | (int64_t(p[2]) << 8) | int64_t(p[3]);
    if (dim <= 0) throw fail("dimension " + std::to_string(d) + " is " + std::to_string(dim));
    if (count > INT64_MAX / dim) throw fail("its header's dimensions multiply past 2^63 bytes");
    a.dims.push_back(dim);
    count *= dim;
  }
  // the header's size, but never more than the file can inflate to (deflate's best ratio
  // is 1032:1), so that a corrupt header cannot ask for more memory than the data holds
  struct stat st {};
  const int64_t can_hold = ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) * 1032 : count;
  a.data.resize(size_t(std::min(count, can_hold)));
  int64_t held = int64_t(in.read(a.data.data(), a.data.size()));
  uint8_t rest[1 << 16];  // trailing bytes are counted, for the message
  for (size_t k; (k = in.read(rest, sizeof rest)) > 0;) held += int64_t(k);
  if (held != count)
    throw fail("holds " + std::to_string(held) + " data bytes, its header says " + std::to_string(count) +
               (held < count ? " (truncated)" : " (trailing bytes)"));
  return a;
}

}  // namespace strata
