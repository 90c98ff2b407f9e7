#include "checkpoint/gpt2_layout.hpp"

#include <cstdio>
#include <utility>

#include "model/model_kind.hpp"

namespace strata {
namespace {

struct BlockName {
  const char* strata;
  const char* hf;
  const char* llmc;
  bool transposed;
};
constexpr BlockName kBlock[] = {{"ln1.weight", "ln_1.weight", "ln1w", false},
                                {"ln1.bias", "ln_1.bias", "ln1b", false},
                                {"attn.qkv.weight", "attn.c_attn.weight", "qkvw", true},
                                {"attn.qkv.bias", "attn.c_attn.bias", "qkvb", false},
                                {"attn.proj.weight", "attn.c_proj.weight", "attprojw", true},
                                {"attn.proj.bias", "attn.c_proj.bias", "attprojb", false},
                                {"ln2.weight", "ln_2.weight", "ln2w", false},
                                {"ln2.bias", "ln_2.bias", "ln2b", false},
                                {"mlp.fc.weight", "mlp.c_fc.weight", "fcw", true},
                                {"mlp.fc.bias", "mlp.c_fc.bias", "fcb", false},
                                {"mlp.proj.weight", "mlp.c_proj.weight", "fcprojw", true},
                                {"mlp.proj.bias", "mlp.c_proj.bias", "fcprojb", false}};
constexpr std::pair<const char*, std::pair<const char*, const char*>> kOuter[] = {
    {"wte", {"transformer.wte.weight", "wte"}},
    {"wpe", {"transformer.wpe.weight", "wpe"}},
    {"lnf.weight", {"transformer.ln_f.weight", "lnfw"}},
    {"lnf.bias", {"transformer.ln_f.bias", "lnfb"}}};

// "blocks.<l>.<rest>" -> (l, rest)
std::optional<std::pair<int64_t, std::string>> block_part(const std::string& name) {
  if (name.rfind("blocks.", 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos) return std::nullopt;
  return std::make_pair(int64_t(std::stoll(name.substr(7, dot - 7))), name.substr(dot + 1));
}

std::optional<ForeignTensor> lookup(const std::string& strata_name, bool hf) {
  for (const auto& [s, names] : kOuter)
    if (strata_name == s) return ForeignTensor{hf ? names.first : names.second, -1, false};
  const auto part = block_part(strata_name);
  if (!part) return std::nullopt;
  for (const auto& b : kBlock)
    if (part->second == b.strata) {
      if (hf) return ForeignTensor{"transformer.h." + std::to_string(part->first) + "." + b.hf, -1, false};
      return ForeignTensor{b.llmc, part->first, b.transposed};
    }
  return std::nullopt;
}

}  // namespace

std::optional<ForeignTensor> hf_tensor(const std::string& strata_name) { return lookup(strata_name, true); }
std::optional<ForeignTensor> llmc_tensor(const std::string& strata_name) { return lookup(strata_name, false); }

bool is_matrix(const std::string& strata_name, const std::vector<int64_t>& shape) {
  return shape.size() >= 2 && strata_name.find(".bias") == std::string::npos;
}

int64_t matrix_rows(const std::string& strata_name, const std::vector<int64_t>& shape) {
  return is_matrix(strata_name, shape) ? shape[0] : 1;
}

std::string gpt2_export_refusal(const ModelConfig& m) {
  if (!is_gpt(m)) return "it holds a model of kind \"" + m.kind + "\", and GPT-2's formats hold GPTs";
  if (m.moe_experts > 0)
    return "its model has mixture-of-experts layers (model.moe_experts = " + std::to_string(m.moe_experts) +
           "), which GPT-2's formats have no place for";
  return "";
}

std::string hf_config_json(const ModelConfig& m, const std::string& torch_dtype) {
  char eps[32];
  std::snprintf(eps, sizeof(eps), "%.17g", m.init_std);
  const auto n = [](int64_t v) { return std::to_string(v); };
  return std::string("{\n") + "  \"architectures\": [\"GPT2LMHeadModel\"],\n" + "  \"model_type\": \"gpt2\",\n" +
         "  \"vocab_size\": " + n(m.vocab_size) + ",\n" + "  \"n_positions\": " + n(m.seq_len) + ",\n" +
         "  \"n_ctx\": " + n(m.seq_len) + ",\n" + "  \"n_embd\": " + n(m.n_embd) + ",\n" +
         "  \"n_layer\": " + n(m.n_layer) + ",\n" + "  \"n_head\": " + n(m.n_head) + ",\n" + "  \"n_inner\": null,\n" +
         "  \"activation_function\": \"gelu_new\",\n" + "  \"layer_norm_epsilon\": 1e-05,\n" +
         "  \"initializer_range\": " + eps + ",\n" + "  \"resid_pdrop\": 0.0,\n" + "  \"embd_pdrop\": 0.0,\n" +
         "  \"attn_pdrop\": 0.0,\n" + "  \"scale_attn_weights\": true,\n" + "  \"tie_word_embeddings\": true,\n" +
         "  \"torch_dtype\": \"" + torch_dtype + "\"\n}\n";
}

}  // namespace strata
