#pragma once
// llm.c's GPT-2 model file (train_gpt2.c's gpt2_build_from_checkpoint): 256 int32 of
// header ([0] magic 20240326, [1] version: 3 fp32 or 5 bf16, [2] maxT, [3] V, [4] L,
// [5] NH, [6] C, [7] Vp, the vocabulary padded), then 16 tensors back to back, each [out, in]
// and stacked over the layers: wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C),
// qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w (L, C),
// ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C),
// lnfw (C), lnfb (C).
#include <cstdint>
#include <string>
#include <vector>

#include "io/stored_tensor.hpp"

namespace strata {

constexpr int32_t kLlmcModelMagic = 20240326;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

struct LlmcModelHeader {
  int32_t version = 3;  // 3: fp32, 5: bf16
  int64_t max_t = 0, vocab = 0, layers = 0, heads = 0, channels = 0, padded_vocab = 0;
  StoredDtype dtype() const { return version == 5 ? StoredDtype::BF16 : StoredDtype::F32; }
};

// The 16 tensors of a file with this header, in the file's order, with their offsets.
std::vector<StoredTensor> llmc_model_tensors(const LlmcModelHeader& h);

// Reads and checks reader's header: a wrong magic or version, dimensions that are not
// positive (or Vp < V, C not divisible by NH), or a size that is not the header's tensors'
// exactly, is one UserError naming the file.
LlmcModelHeader read_llmc_model_header(const TensorFileReader& reader);

// The 1024 bytes of the header.
std::string llmc_model_header_bytes(const LlmcModelHeader& h);

// llm.c's padding of a vocabulary: up to a multiple of 128.
inline int64_t llmc_padded_vocab(int64_t vocab) { return (vocab + 127) / 128 * 128; }

}  // namespace strata
