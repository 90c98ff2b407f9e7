#pragma once
// `strata generate CKPT.h5 --prompt TEXT --tokens N`: sample from a trained GPT.
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct GenerateOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;  // 0: always the most likely token
  uint64_t seed = 1;
};

// Builds the model the checkpoint's deck describes, loads its weights and returns the
// sampled token ids (the prompt not included). Byte-level models take the prompt as bytes.
std::vector<int32_t> generate_tokens(const std::string& checkpoint, const GenerateOptions& opts);

}  // namespace strata
