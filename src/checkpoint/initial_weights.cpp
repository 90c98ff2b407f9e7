#include "checkpoint/initial_weights.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/gpt2_layout.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "core/error.hpp"
#include "io/json_text.hpp"
#include "io/llmc_model_file.hpp"
#include "io/safetensors.hpp"
#include "model/model_kind.hpp"

namespace strata {
namespace {

enum class Format { HF, Llmc, Strata };

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Format sniff(const TensorFileReader& f) {
  unsigned char head[9] = {};
  const int64_t n = std::min<int64_t>(9, f.size());
  f.read_bytes(0, n, head);
  static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (n >= 8 && std::memcmp(head, hdf5, 8) == 0) return Format::Strata;
  int32_t magic = 0;
  if (n >= 4) std::memcpy(&magic, head, 4);
  if (magic == kLlmcModelMagic) return Format::Llmc;
  if (magic == 20240520)
    throw UserError(f.path() +
                    ": model.init_from names an llm.c token shard (magic 20240520), not a model file "
                    "(magic 20240326)");
  if (n >= 9 && head[8] == '{') return Format::HF;
  throw UserError(f.path() +
                  ": model.init_from names a file that is neither safetensors, an llm.c model file nor "
                  "a strata checkpoint (by its first bytes)");
}

// A Hugging Face folder's config.json against the deck's model (when the folder has one).
void check_hf_config(const std::string& path, const ModelConfig& m) {
  std::ifstream in(path);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  const JsonValue cfg = parse_json(text.str(), path);
  const auto need = [&](const char* key, int64_t deck_value, const char* deck_key) {
    const JsonValue* v = cfg.find(key);
    if (v && v->is_integer() && v->integer() != deck_value)
      throw UserError(path + ": " + key + " = " + v->text + ", the deck's " + deck_key + " = " +
                      std::to_string(deck_value));
  };
  need("n_layer", m.n_layer, "model.n_layer");
  need("n_embd", m.n_embd, "model.n_embd");
  need("n_head", m.n_head, "model.n_head");
  need("n_positions", m.seq_len, "model.seq_len");
  need("vocab_size", m.vocab_size, "model.vocab_size");
  if (const JsonValue* t = cfg.find("model_type"); t && t->text != "gpt2")
    throw UserError(path + ": model_type \"" + t->text + "\" is not \"gpt2\"");
  if (const JsonValue* a = cfg.find("activation_function");
      a && a->text != "gelu_new" && a->text != "gelu_pytorch_tanh")
    throw UserError(path + ": activation_function \"" + a->text + "\": strata's GPT has GELU's tanh form (gelu_new)");
  if (const JsonValue* e = cfg.find("layer_norm_epsilon"); e && e->kind == JsonValue::Kind::Number && e->number != 1e-5)
    throw UserError(path + ": layer_norm_epsilon = " + e->text + ", strata's layer norms use 1e-05");
  if (const JsonValue* t = cfg.find("tie_word_embeddings"); t && t->kind == JsonValue::Kind::Bool && !t->boolean)
    throw UserError(path + ": tie_word_embeddings is false, and strata's LM head is the token embedding");
}

// Where strata's tensor p lies in the file: the stored matrix (`cols` values a row, in the
// file's layout) and whether it is strata's view transposed.
struct Stored {
  StoredTensor t;
  int64_t cols = 0;
  bool transposed = false;
};

// Reads this rank's box of p (p.start, p.count) from a stored matrix into out, through
// strata's matrix view [R, K] of p (gpt2_layout's matrix_rows); rows of the view at or past
// real_rows are zeros (a vocabulary's padding).
void read_box(const TensorFileReader& f, const ParamInfo& p, const Stored& s, int64_t real_rows, float* out) {
  const size_t nd = p.shape.size();
  const bool matrix = is_matrix(p.name, p.shape);
  // the box's runs along its last dimension, as (column of the view, length): the same for
  // every row of the view (a vector's box lies in its one row)
  std::vector<int64_t> strides(nd, 1);
  for (size_t d = nd - 1; d-- > 0;) strides[d] = strides[d + 1] * p.shape[d + 1];
  std::vector<std::pair<int64_t, int64_t>> runs;
  std::function<void(size_t, int64_t)> walk = [&](size_t d, int64_t col) {
    if (d + 1 == nd) {
      runs.emplace_back(col + p.start[d], p.count[d]);
      return;
    }
    for (int64_t i = 0; i < p.count[d]; ++i) walk(d + 1, col + (p.start[d] + i) * strides[d]);
  };
  walk(matrix ? 1 : 0, 0);
  const int64_t r0 = matrix ? p.start[0] : 0, r1 = matrix ? p.start[0] + p.count[0] : 1;
  int64_t k0 = p.global_numel, k1 = 0;
  for (const auto& [c, n] : runs) k0 = std::min(k0, c), k1 = std::max(k1, c + n);
  const int64_t real1 = std::min(r1, real_rows), width = k1 - k0;
  std::vector<float> block(size_t(std::max<int64_t>(real1 - r0, 0) * width));
  if (real1 > r0) {
    if (!s.transposed) {
      f.read_block(s.t, s.cols, r0, real1, k0, k1, block.data());
    } else {  // the file's rows are the view's columns
      std::vector<float> tb(block.size());
      f.read_block(s.t, s.cols, k0, k1, r0, real1, tb.data());
      const int64_t h = real1 - r0;
      for (int64_t k = 0; k < width; ++k)
        for (int64_t r = 0; r < h; ++r) block[size_t(r * width + k)] = tb[size_t(k * h + r)];
    }
  }
  float* o = out;
  for (int64_t r = r0; r < r1; ++r)
    for (const auto& [c, n] : runs) {
      if (r < real1)
        std::memcpy(o, block.data() + (r - r0) * width + (c - k0), size_t(n) * sizeof(float));
      else
        std::fill(o, o + n, 0.0f);
      o += n;
    }
}

[[noreturn]] void mismatch(const std::string& path, const std::string& tensor, const std::vector<int64_t>& has,
                           const std::vector<int64_t>& needs) {
  throw UserError(path + ": tensor " + tensor + " has shape " + shape_text(has) + ", the deck's model needs " +
                  shape_text(needs));
}

// The stored matrices of a Hugging Face file for every tensor of store.
std::vector<Stored> hf_layout(const std::string& path, const SafetensorsFile& file, const ModelConfig& m,
                              const ParamStore<float>& store, std::string& note) {
  // the hub's GPT-2 names its tensors without the "transformer." prefix
  const bool prefixed = file.find("transformer.wte.weight") != nullptr;
  std::vector<Stored> out;
  int64_t used = 0;
  for (const auto& p : store.infos()) {
    const auto ft = hf_tensor(p.name);
    if (!ft) throw UserError(path + ": strata's tensor " + p.name + " has no Hugging Face GPT-2 counterpart");
    const std::string name = prefixed ? ft->name : ft->name.substr(std::strlen("transformer."));
    const StoredTensor* t = file.find(name);
    if (!t) throw UserError(path + ": no tensor " + name + " (the deck's model needs it)");
    const int64_t R = matrix_rows(p.name, p.shape), K = p.global_numel / R;
    std::vector<int64_t> needs = R == 1 ? std::vector<int64_t>{K} : std::vector<int64_t>{R, K};
    if (p.name == "wte") needs[0] = m.vocab_size;  // the file holds the real vocabulary
    if (t->shape != needs) mismatch(path, name, t->shape, needs);
    out.push_back({*t, K, false});
    ++used;
  }
  if (int64_t(file.tensors.size()) > used) {
    std::string first;
    for (const auto& t : file.tensors) {
      bool mine = false;
      for (const auto& s : out) mine = mine || s.t.name == t.name;
      if (!mine && first.empty()) first = t.name;
    }
    note = "; " + std::to_string(int64_t(file.tensors.size()) - used) + " tensors the model does not use (e.g. " +
           first + ") left aside";
  }
  return out;
}

// The stored matrices of an llm.c file for every tensor of store.
std::vector<Stored> llmc_layout(const std::string& path, const LlmcModelHeader& h, const ModelConfig& m,
                                const ParamStore<float>& store) {
  if (h.vocab != m.vocab_size)
    throw UserError(path + ": tensor wte holds a vocabulary of V = " + std::to_string(h.vocab) + " (padded to " +
                    std::to_string(h.padded_vocab) + "), the deck's model.vocab_size is " +
                    std::to_string(m.vocab_size));
  if (h.heads != m.n_head)
    throw UserError(path + ": the file's NH = " + std::to_string(h.heads) +
                    ", the deck's model.n_head = " + std::to_string(m.n_head));
  // the deck's model as an llm.c header: its tensors' shapes are what the file's must be
  LlmcModelHeader want = h;
  want.max_t = m.seq_len;
  want.layers = m.n_layer;
  want.channels = m.n_embd;
  const auto has = llmc_model_tensors(h), needs = llmc_model_tensors(want);
  for (size_t i = 0; i < has.size(); ++i)
    if (has[i].shape != needs[i].shape) mismatch(path, has[i].name, has[i].shape, needs[i].shape);
  std::vector<Stored> out;
  for (const auto& p : store.infos()) {
    const auto ft = llmc_tensor(p.name);
    if (!ft) throw UserError(path + ": strata's tensor " + p.name + " has no place in llm.c's GPT-2");
    const StoredTensor* stacked = nullptr;
    for (const auto& t : has)
      if (t.name == ft->name) stacked = &t;
    Stored s;
    s.t = *stacked;
    s.transposed = ft->transposed;
    if (ft->layer >= 0) {  // the block's slice
      s.t.shape.erase(s.t.shape.begin());
      s.t.offset += ft->layer * s.t.bytes();
    }
    s.cols = s.t.shape.back();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string load_initial_weights(const std::string& given, const ModelConfig& m, ParamStore<float>& store) {
  std::string path = given, note;
  struct stat given_st {};
  if (::stat(given.c_str(), &given_st) != 0)
    throw UserError("model.init_from = '" + given + "': " + std::strerror(errno));
  if (is_directory(given)) {
    path = given + "/model.safetensors";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      throw UserError(given + ": model.init_from names a folder without model.safetensors" +
                      std::string(::stat((given + "/model.safetensors.index.json").c_str(), &st) == 0
                                      ? " (a sharded model.safetensors.index.json is not read: merge the shards first)"
                                      : ""));
    check_hf_config(given + "/config.json", m);
  }
  const TensorFileReader file(path);
  const Format format = sniff(file);
  if (format == Format::Strata) {
    const std::string what = read_checkpoint_params(path, store, m.n_head);
    return "strata checkpoint '" + path + "' (" + what + ")";
  }
  if (!is_gpt(m))
    throw UserError(path + ": model.init_from reads GPT-2 weights only into a GPT (model.kind = \"gpt\")");
  if (m.moe_experts > 0)
    throw UserError(path + ": GPT-2's weights have no mixture-of-experts layers (model.moe_experts = " +
                    std::to_string(m.moe_experts) + "); start a mixture from a strata checkpoint");
  std::vector<Stored> layout;
  std::string what;
  if (format == Format::HF) {
    const SafetensorsFile st = read_safetensors_header(file);
    layout = hf_layout(path, st, m, store, note);
    what = "Hugging Face safetensors '" + path + "' (" + dtype_name(layout.front().t.dtype) + ")";
  } else {
    const LlmcModelHeader h = read_llmc_model_header(file);
    layout = llmc_layout(path, h, m, store);
    what = "llm.c model file '" + path + "' (version " + std::to_string(h.version) + ", " + dtype_name(h.dtype()) +
           ", V " + std::to_string(h.vocab) + " padded to " + std::to_string(h.padded_vocab) + ")";
  }
  // every shape checked: read this rank's boxes, one tensor at a time
  const bool owned =
      store.zero().params_sharded();  // ZeRO-3: this rank keeps the part of each tensor its moments cover
  auto& params = owned ? store.zero().owned_params() : store.params();
  auto host = Kokkos::create_mirror_view(params);
  const auto& infos = store.infos();
  std::vector<float> whole;
  for (size_t i = 0; i < infos.size(); ++i) {
    const auto& p = infos[i];
    if (p.numel == 0) continue;  // another stage's
    const int64_t rows = p.name == "wte" ? m.vocab_size : p.shape[0];
    if (!owned) {
      read_box(file, p, layout[i], rows, host.data() + p.offset);
      continue;
    }
    whole.assign(size_t(p.numel), 0.0f);
    read_box(file, p, layout[i], rows, whole.data());
    for (const auto& part : store.zero().moment_parts(p))
      std::copy(whole.begin() + (part.begin - p.offset), whole.begin() + (part.end - p.offset), host.data() + part.at);
  }
  Kokkos::deep_copy(params, host);
  return what + note;
}

}  // namespace strata
