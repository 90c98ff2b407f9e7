#pragma once
// Tensors stored in files made elsewhere (safetensors, llm.c's model files): their
// element types, reading a block of one without reading the rest, and writing a file
// front to back. Files are little-endian, as every machine strata runs on.
#include <cstdint>
#include <string>
#include <vector>

#include "io/file_descriptor.hpp"

namespace strata {

enum class StoredDtype { F32, BF16, F16, F64 };

int64_t dtype_bytes(StoredDtype d);
// safetensors' names: "F32", "BF16", "F16", "F64".
const char* dtype_name(StoredDtype d);

// Round to nearest even (NaN stays NaN, subnormals kept: what PyTorch's .to(bfloat16) does),
// and the exact widenings.
uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t h);
float f16_to_float(uint16_t h);

// A tensor's values in a file: row-major `shape`, of `dtype`, from byte `offset`.
struct StoredTensor {
  std::string name;
  StoredDtype dtype = StoredDtype::F32;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype_bytes(dtype); }
};

// "[768, 2304]"
std::string shape_text(const std::vector<int64_t>& shape);

// A file opened for reading parts of its tensors (pread; nothing mapped or read twice).
class TensorFileReader {
 public:
  // Throws UserError naming the file when it cannot be opened.
  explicit TensorFileReader(const std::string& path);

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // n bytes at offset; throws UserError when the file ends before them.
  void read_bytes(int64_t offset, int64_t n, void* out) const;
  // Rows [r0, r1) and columns [k0, k1) of t seen as a matrix of `cols` columns (its
  // values row-major), widened to float, into out ((r1 - r0) x (k1 - k0), row-major).
  void read_block(const StoredTensor& t, int64_t cols, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                  float* out) const;

 private:
  std::string path_;
  FileDescriptor fd_;
  int64_t size_ = 0;
};

// A new file written front to back: refuses an existing path, fsyncs on close. Every
// failure throws IoError naming the file and the system's reason.
class SequentialFile {
 public:
  explicit SequentialFile(const std::string& path);

  void write(const void* data, int64_t bytes);
  // n floats as dtype (F32 or BF16).
  void write_values(const float* values, int64_t n, StoredDtype dtype);
  void close();
  int64_t written() const { return written_; }

 private:
  std::string path_;
  FileDescriptor fd_;
  int64_t written_ = 0;
  std::vector<uint16_t> half_;
};

}  // namespace strata
