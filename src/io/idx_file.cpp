#include "io/idx_file.hpp"

#include <zlib.h>

#include "core/error.hpp"

namespace strata {
namespace {

// The whole file, inflated when it is gzip (gzread passes plain files through).
std::vector<uint8_t> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw UserError("cannot open IDX file '" + path + "'");
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  const bool failed = n < 0 || (err != Z_OK && err != Z_STREAM_END);
  const std::string why = failed ? std::string(msg ? msg : "read error") : "";
  gzclose(f);
  if (failed) throw UserError("IDX file '" + path + "': " + why + " (corrupt or truncated gzip?)");
  return out;
}

}  // namespace

IdxArray read_idx(const std::string& path, int rank) {
  const std::vector<uint8_t> bytes = read_all(path);
  const auto fail = [&](const std::string& why) -> UserError { return UserError("IDX file '" + path + "': " + why); };
  if (bytes.size() < 4) throw fail("shorter than its 4-byte magic number");
  if (bytes[0] != 0 || bytes[1] != 0) throw fail("bad magic number (not an IDX file)");
  if (bytes[2] != 0x08) throw fail("element type " + std::to_string(int(bytes[2])) + ", expected 8 (unsigned byte)");
  if (int(bytes[3]) != rank)
    throw fail(std::to_string(int(bytes[3])) + " dimensions, expected " + std::to_string(rank));
  const size_t header = 4 + 4 * size_t(rank);
  if (bytes.size() < header) throw fail("header truncated");
  IdxArray a;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    const int64_t dim = (int64_t(p[0]) << 24) | (int64_t(p[1]) << 16) | (int64_t(p[2]) << 8) | int64_t(p[3]);
    if (dim <= 0) throw fail("dimension " + std::to_string(d) + " is " + std::to_string(dim));
    a.dims.push_back(dim);
    count *= dim;
  }
  if (int64_t(bytes.size() - header) != count)
    throw fail("holds " + std::to_string(bytes.size() - header) + " data bytes, its header says " +
               std::to_string(count) + (int64_t(bytes.size() - header) < count ? " (truncated)" : " (trailing bytes)"));
  a.data.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return a;
}

}  // namespace strata
