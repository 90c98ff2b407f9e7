#include "io/stored_tensor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/error.hpp"

namespace strata {

int64_t dtype_bytes(StoredDtype d) {
  switch (d) {
    case StoredDtype::F32:
      return 4;
    case StoredDtype::BF16:
    case StoredDtype::F16:
      return 2;
    case StoredDtype::F64:
      return 8;
  }
  return 0;
}

const char* dtype_name(StoredDtype d) {
  switch (d) {
    case StoredDtype::F32:
      return "F32";
    case StoredDtype::BF16:
      return "BF16";
    case StoredDtype::F16:
      return "F16";
    case StoredDtype::F64:
      return "F64";
  }
  return "?";
}

uint16_t float_to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN, quiet
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x = 0;
  std::memcpy(&x, &u, 4);
  return x;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float mag = 0;
  if (exp == 0)
    mag = std::ldexp(float(man), -24);
  else if (exp == 31)
    mag = man ? NAN : INFINITY;
  else
    mag = std::ldexp(float(man | 0x400), int(exp) - 25);
  uint32_t u = 0;
  std::memcpy(&u, &mag, 4);
  u |= sign;
  float x = 0;
  std::memcpy(&x, &u, 4);
  return x;
}

int64_t StoredTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

TensorFileReader::TensorFileReader(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY)) {
  if (!fd_.is_open()) throw UserError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode)) throw UserError(path + ": not a regular file");
  size_ = int64_t(st.st_size);
}

void TensorFileReader::read_bytes(int64_t offset, int64_t n, void* out) const {
  if (offset < 0 || n < 0 || offset + n > size_)
    throw UserError(path_ + ": the file ends at byte " + std::to_string(size_) + ", before bytes " +
                    std::to_string(offset) + "-" + std::to_string(offset + n) + " (truncated?)");
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd_.get(), p, size_t(n), off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw UserError(path_ + ": read failed at byte " + std::to_string(offset) + ": " +
                      (got < 0 ? std::strerror(errno) : "unexpected end of file"));
    p += got;
    offset += got;
    n -= got;
  }
}

void TensorFileReader::read_block(const StoredTensor& t, int64_t cols, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                                  float* out) const {
  const int64_t width = k1 - k0, eb = dtype_bytes(t.dtype);
  if (r1 <= r0 || width <= 0) return;
  std::vector<unsigned char> row(size_t(width * eb));
  for (int64_t r = r0; r < r1; ++r) {
    read_bytes(t.offset + (r * cols + k0) * eb, width * eb, row.data());
    float* o = out + (r - r0) * width;
    const unsigned char* b = row.data();
    switch (t.dtype) {
      case StoredDtype::F32:
        std::memcpy(o, b, size_t(width) * 4);
        break;
      case StoredDtype::F64:
        for (int64_t k = 0; k < width; ++k) {
          double d = 0;
          std::memcpy(&d, b + 8 * k, 8);
          o[k] = float(d);
        }
        break;
      case StoredDtype::BF16:
      case StoredDtype::F16:
        for (int64_t k = 0; k < width; ++k) {
          uint16_t h = 0;
          std::memcpy(&h, b + 2 * k, 2);
          o[k] = t.dtype == StoredDtype::BF16 ? bf16_to_float(h) : f16_to_float(h);
        }
        break;
    }
  }
}

SequentialFile::SequentialFile(const std::string& path)
    : path_(path), fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644)) {
  if (!fd_.is_open()) throw IoError(path + ": cannot create: " + std::strerror(errno));
}

void SequentialFile::write(const void* data, int64_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_.get(), p, size_t(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(path_ + ": cannot write: " + std::strerror(n < 0 ? errno : EIO));
    p += n;
    bytes -= n;
    written_ += n;
  }
}

void SequentialFile::write_values(const float* values, int64_t n, StoredDtype dtype) {
  if (dtype == StoredDtype::F32) return write(values, n * 4);
  if (dtype != StoredDtype::BF16) throw std::logic_error("SequentialFile::write_values: F32 or BF16 only");
  half_.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) half_[size_t(i)] = float_to_bf16(values[i]);
  write(half_.data(), n * 2);
}

void SequentialFile::close() {
  if (!fd_.is_open()) return;
  if (::fsync(fd_.get()) != 0) {
    const int err = errno;
    fd_.close();
    throw IoError(path_ + ": cannot flush: " + std::strerror(err));
  }
  if (const int err = fd_.close(); err != 0) throw IoError(path_ + ": cannot close: " + std::strerror(err));
}

}  // namespace strata
