#pragma once
// safetensors (Hugging Face's tensor file): 8 bytes little-endian N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "value"}}, then the tensors' bytes; offsets count from the end
// of the header.
#include <string>
#include <utility>
#include <vector>

#include "io/stored_tensor.hpp"

namespace strata {

struct SafetensorsFile {
  std::vector<StoredTensor> tensors;  // offsets from the start of the file
  std::vector<std::pair<std::string, std::string>> metadata;
  const StoredTensor* find(const std::string& name) const;
};

// Reads and checks the header of reader's file: one UserError naming the file and the fault
// for a truncated file, a header that is not JSON or runs past the file, an unknown dtype,
// a tensor whose offsets do not match its shape, overlap another's or lie past the end.
SafetensorsFile read_safetensors_header(const TensorFileReader& reader);

// The header bytes (length prefix included, padded with spaces to a multiple of 8 bytes,
// as the format recommends) of a file holding `tensors` back to back in the given order;
// sets each tensor's offset (from the start of the file).
std::string safetensors_header(std::vector<StoredTensor>& tensors,
                               const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace strata
