#include "io/llmc_model_file.hpp"

#include <cstring>

#include "core/error.hpp"

namespace strata {

std::vector<StoredTensor> llmc_model_tensors(const LlmcModelHeader& h) {
  const int64_t L = h.layers, C = h.channels;
  const std::vector<std::pair<const char*, std::vector<int64_t>>> shapes = {{"wte", {h.padded_vocab, C}},
                                                                            {"wpe", {h.max_t, C}},
                                                                            {"ln1w", {L, C}},
                                                                            {"ln1b", {L, C}},
                                                                            {"qkvw", {L, 3 * C, C}},
                                                                            {"qkvb", {L, 3 * C}},
                                                                            {"attprojw", {L, C, C}},
                                                                            {"attprojb", {L, C}},
                                                                            {"ln2w", {L, C}},
                                                                            {"ln2b", {L, C}},
                                                                            {"fcw", {L, 4 * C, C}},
                                                                            {"fcb", {L, 4 * C}},
                                                                            {"fcprojw", {L, C, 4 * C}},
                                                                            {"fcprojb", {L, C}},
                                                                            {"lnfw", {C}},
                                                                            {"lnfb", {C}}};
  std::vector<StoredTensor> out;
  int64_t at = kLlmcHeaderBytes;
  for (const auto& [name, shape] : shapes) {
    StoredTensor t;
    t.name = name;
    t.dtype = h.dtype();
    t.shape = shape;
    t.offset = at;
    at += t.bytes();
    out.push_back(std::move(t));
  }
  return out;
}

LlmcModelHeader read_llmc_model_header(const TensorFileReader& reader) {
  const std::string& path = reader.path();
  const auto fail = [&](const std::string& why) { throw UserError(path + ": not an llm.c model file: " + why); };
  if (reader.size() < kLlmcHeaderBytes) fail("shorter than its 1024-byte header");
  int32_t w[256];
  reader.read_bytes(0, kLlmcHeaderBytes, w);
  if (w[0] != kLlmcModelMagic) fail("magic " + std::to_string(w[0]) + ", not " + std::to_string(kLlmcModelMagic));
  if (w[1] != 3 && w[1] != 5) fail("version " + std::to_string(w[1]) + ", not 3 (fp32) or 5 (bf16)");
  LlmcModelHeader h;
  h.version = w[1];
  h.max_t = w[2];
  h.vocab = w[3];
  h.layers = w[4];
  h.heads = w[5];
  h.channels = w[6];
  h.padded_vocab = w[7];
  if (h.max_t <= 0 || h.vocab <= 0 || h.layers <= 0 || h.heads <= 0 || h.channels <= 0)
    fail("maxT, V, L, NH and C must be positive");
  if (h.padded_vocab < h.vocab)
    fail("padded vocabulary " + std::to_string(h.padded_vocab) + " < V = " + std::to_string(h.vocab));
  if (h.channels % h.heads != 0)
    fail("C = " + std::to_string(h.channels) + " is not divisible by NH = " + std::to_string(h.heads));
  int64_t bytes = kLlmcHeaderBytes;
  for (const auto& t : llmc_model_tensors(h)) bytes += t.bytes();
  if (bytes != reader.size())
    fail("its header's tensors need " + std::to_string(bytes) + " bytes, the file has " +
         std::to_string(reader.size()) + (reader.size() < bytes ? " (truncated?)" : ""));
  return h;
}

std::string llmc_model_header_bytes(const LlmcModelHeader& h) {
  int32_t w[256] = {};
  w[0] = kLlmcModelMagic;
  w[1] = h.version;
  w[2] = int32_t(h.max_t);
  w[3] = int32_t(h.vocab);
  w[4] = int32_t(h.layers);
  w[5] = int32_t(h.heads);
  w[6] = int32_t(h.channels);
  w[7] = int32_t(h.padded_vocab);
  return std::string(reinterpret_cast<const char*>(w), sizeof(w));
}

}  // namespace strata
