#pragma once
// Where each of strata's GPT tensors lies in GPT-2's two other homes: Hugging Face's
// GPT2LMHeadModel (safetensors; Conv1D weights [in, out], as strata stores them) and
// llm.c's model file (weights [out, in], every block's tensor stacked over the layers).
// The table of both directions is docs/interop.md's.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/deck.hpp"

namespace strata {

// One of strata's tensors as another format stores it.
struct ForeignTensor {
  std::string name;         // "transformer.h.3.attn.c_attn.weight", or llm.c's "qkvw"
  int64_t layer = -1;       // llm.c: the block's slice of a tensor stacked over layers (-1: not stacked)
  bool transposed = false;  // stored [out, in] where strata has [in, out] (llm.c's weights)
};

// strata's global name -> Hugging Face's (with the "transformer." prefix) or llm.c's;
// nothing for a tensor the format has no place for (a mixture of experts' tensors).
std::optional<ForeignTensor> hf_tensor(const std::string& strata_name);
std::optional<ForeignTensor> llmc_tensor(const std::string& strata_name);

// strata's GPT tensors seen as matrices: a weight of shape [in, ...] is `shape[0]` rows of
// the rest; a vector (a bias, a layer norm's, and the [3, C] qkv bias) is one row. This is
// the view both formats store (transposed or not) and what a shard's box is read through.
bool is_matrix(const std::string& strata_name, const std::vector<int64_t>& shape);
int64_t matrix_rows(const std::string& strata_name, const std::vector<int64_t>& shape);

// Why a checkpoint's model cannot be written as GPT-2 ("" when it can): another kind, or
// a mixture of experts.
std::string gpt2_export_refusal(const ModelConfig& m);

// The Hugging Face config.json of the model (GPT2LMHeadModel, gelu_new, tied embeddings).
std::string hf_config_json(const ModelConfig& m, const std::string& torch_dtype);

}  // namespace strata
