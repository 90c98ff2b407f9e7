#pragma once
// IDX files (the MNIST / Fashion-MNIST format, optionally gzip-compressed): a big-endian
// header (two zero bytes, the element type, the number of dimensions, then each
// dimension as a 32-bit integer) followed by the elements. strata reads unsigned-byte
// files (type 0x08), the type of every MNIST-family image and label file.
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads path (gzip or plain, told apart by its first bytes). Throws UserError naming the
// file and the cause for a missing or unreadable file, a bad magic number, an element
// type other than unsigned byte, a number of dimensions other than `rank`, or a size that
// does not match the header (truncated or trailing bytes).
IdxArray read_idx(const std::string& path, int rank);

}  // namespace strata
