#include "cli/export_model.hpp"
#include "model/model_kind.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "checkpoint/checkpoint_file.hpp"
#include "checkpoint/gpt2_layout.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "core/deck.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "io/file_descriptor.hpp"
#include "io/llmc_model_file.hpp"
#include "io/safetensors.hpp"
#include "model/make_model.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;

// The checkpoint's tensors by strata name, read whole one at a time.
class CheckpointTensors {
 public:
  explicit CheckpointTensors(const std::string& path) : r_(path) {}
  std::vector<float> read(const std::string& name, std::vector<int64_t>* shape = nullptr) const {
    const auto s = r_.shape("/params/" + name);
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    r_.read_tensor("/params/" + name, v.data());
    if (shape) *shape = s;
    return v;
  }
  const CheckpointReader& reader() const { return r_; }

 private:
  CheckpointReader r_;
};

void fsync_path(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY));
  if (!fd.is_open() || ::fsync(fd.get()) != 0) throw IoError(path + ": cannot flush: " + std::strerror(errno));
}

void write_text(const std::string& path, const std::string& text) {
  SequentialFile f(path);
  f.write(text.data(), int64_t(text.size()));
  f.close();
}

// [rows, cols] of v, transposed.
std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = v[size_t(r * cols + c)];
  return t;
}

std::string export_readme(const std::string& checkpoint, int64_t step, const Deck& deck, bool tokenizer) {
  std::string ids;
  if (tokenizer)
    ids =
        "Token ids are those of `tokenizer.model`, the SentencePiece model the run's data was tokenized with "
        "(load it with `sentencepiece.SentencePieceProcessor(model_file=\"tokenizer.model\")`). It is not a "
        "Hugging Face tokenizer: encode text with SentencePiece and pass the ids to the model.\n";
  else if (deck.data.kind == DataKind::Text)
    ids =
        "The model is byte-level: token id b (0-255) is the byte b of UTF-8 text, and ids from 256 up (if any) "
        "never occur in its data. Encode text as `list(text.encode(\"utf-8\"))`; decode with "
        "`bytes(ids).decode(\"utf-8\", errors=\"replace\")`.\n";
  else
    ids =
        "The checkpoint carries no tokenizer: token ids are those of the token shards it was trained on (for "
        "llm.c's GPT-2 shards, GPT-2's BPE: tiktoken's \"gpt2\" encoding, or Hugging Face's \"gpt2\" tokenizer).\n";
  return "# A strata model as a Hugging Face GPT-2\n\nExported by `strata export` from `" + checkpoint + "` (step " +
         std::to_string(step) + ").\n\n" +
         "Load it with `transformers.GPT2LMHeadModel.from_pretrained(\"<this folder>\")`.\n\n" + ids +
         "\nNot exported: the optimizer state (AdamW moments) and the sampler position; to resume training, "
         "restart from the checkpoint itself.\n";
}

std::string export_hf(const std::string& checkpoint, const CheckpointTensors& ck, const Deck& deck,
                      const std::vector<std::string>& names, const ExportOptions& opts, StoredDtype dtype,
                      int64_t step) {
  const auto& m = deck.model;
  struct stat st {};
  if (::stat(opts.out.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw UserError(opts.out + " exists and is not a folder: strata export --format hf writes a folder");
    if (!fs::is_empty(opts.out))
      throw UserError(opts.out + " exists and is not empty: strata export will not write into it");
  }
  const std::string tmp = opts.out + ".partial-" + std::to_string(::getpid());
  const std::string tok = read_checkpoint_tokenizer(checkpoint);
  std::error_code ec;
  if (!fs::create_directory(tmp, ec)) throw IoError(tmp + ": cannot create: " + ec.message());
  try {
    std::vector<StoredTensor> tensors;
    for (const auto& name : names) {
      StoredTensor t;
      t.name = hf_tensor(name)->name;
      t.dtype = dtype;
      t.shape = ck.reader().shape("/params/" + name);
      const int64_t rows = matrix_rows(name, t.shape);
      t.shape = rows == 1 ? std::vector<int64_t>{t.numel()} : std::vector<int64_t>{rows, t.numel() / rows};
      if (name == "wte") t.shape[0] = m.vocab_size;  // without a padding
      tensors.push_back(std::move(t));
    }
    const std::string header = safetensors_header(tensors, {{"format", "pt"}, {"producer", "strata export"}});
    SequentialFile f(tmp + "/model.safetensors");
    f.write(header.data(), int64_t(header.size()));
    for (size_t i = 0; i < names.size(); ++i) {
      const auto v = ck.read(names[i]);
      f.write_values(v.data(), tensors[i].numel(), dtype);  // wte: its first vocab_size rows
    }
    f.close();
    write_text(tmp + "/config.json", hf_config_json(m, dtype == StoredDtype::BF16 ? "bfloat16" : "float32"));
    if (!tok.empty()) write_text(tmp + "/tokenizer.model", tok);
    write_text(tmp + "/README.md", export_readme(checkpoint, step, deck, !tok.empty()));
    fsync_path(tmp);
    if (std::rename(tmp.c_str(), opts.out.c_str()) != 0)
      throw IoError(opts.out + ": cannot rename " + tmp + " to it: " + std::strerror(errno));
    fsync_path(fs::absolute(opts.out).parent_path().string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return strfmt("strata export: %s (config.json, model.safetensors: %zu tensors in %s%s) from step %lld of %s",
                opts.out.c_str(), names.size(), dtype_name(dtype), tok.empty() ? "" : ", tokenizer.model",
                (long long)step, checkpoint.c_str());
}

std::string export_llmc(const std::string& checkpoint, const CheckpointTensors& ck, const Deck& deck,
                        const std::vector<std::string>& names, const ExportOptions& opts, StoredDtype dtype,
                        int64_t step) {
  const auto& m = deck.model;
  struct stat st {};
  if (::lstat(opts.out.c_str(), &st) == 0) throw UserError(opts.out + " exists: strata export will not overwrite it");
  LlmcModelHeader h;
  h.version = dtype == StoredDtype::BF16 ? 5 : 3;
  h.max_t = m.seq_len;
  h.vocab = m.vocab_size;
  h.layers = m.n_layer;
  h.heads = m.n_head;
  h.channels = m.n_embd;
  h.padded_vocab = m.padded_vocab_size > m.vocab_size ? m.padded_vocab_size : llmc_padded_vocab(m.vocab_size);
  const std::string tmp = opts.out + ".partial-" + std::to_string(::getpid());
  try {
    SequentialFile f(tmp);
    const std::string header = llmc_model_header_bytes(h);
    f.write(header.data(), int64_t(header.size()));
    for (const auto& t : llmc_model_tensors(h)) {
      // the strata tensors stored here, in the model's order: one, or one per layer, stacked
      for (const auto& name : names) {
        const auto ft = llmc_tensor(name);
        if (ft->name != t.name) continue;
        std::vector<int64_t> shape;
        auto v = ck.read(name, &shape);
        if (name == "wte") {  // the real vocabulary, then the padding's zeros
          v.resize(size_t(h.padded_vocab * m.n_embd));
          std::fill(v.begin() + m.vocab_size * m.n_embd, v.end(), 0.0f);
        } else if (ft->transposed) {
          const int64_t rows = matrix_rows(name, shape);
          v = transposed(v, rows, int64_t(v.size()) / rows);
        }
        f.write_values(v.data(), int64_t(v.size()), dtype);
      }
    }
    const StoredTensor last = llmc_model_tensors(h).back();
    if (f.written() != last.offset + last.bytes())
      throw std::logic_error("export_llmc: wrote " + std::to_string(f.written()) + " bytes, the header says " +
                             std::to_string(last.offset + last.bytes()));
    f.close();
    if (std::rename(tmp.c_str(), opts.out.c_str()) != 0)
      throw IoError(opts.out + ": cannot rename " + tmp + " to it: " + std::strerror(errno));
    fsync_path(fs::absolute(opts.out).parent_path().string());
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  return strfmt("strata export: %s (llm.c model file version %d, %s, V %lld padded to %lld) from step %lld of %s",
                opts.out.c_str(), h.version, dtype_name(dtype), (long long)h.vocab, (long long)h.padded_vocab,
                (long long)step, checkpoint.c_str());
}

}  // namespace

std::string export_model(const std::string& checkpoint, const ExportOptions& given) {
  ExportOptions opts = given;  // "folder/" names the folder: its temporary goes beside it, not inside
  while (opts.out.size() > 1 && opts.out.back() == '/') opts.out.pop_back();
  if (opts.out.empty()) throw UserError("strata export: the output path is empty");
  if (opts.format != "hf" && opts.format != "llmc")
    throw UserError("strata export: --format must be \"hf\" or \"llmc\", not \"" + opts.format + "\"");
  if (opts.dtype != "fp32" && opts.dtype != "bf16")
    throw UserError("strata export: --dtype must be \"fp32\" or \"bf16\", not \"" + opts.dtype + "\"");
  const StoredDtype dtype = opts.dtype == "bf16" ? StoredDtype::BF16 : StoredDtype::F32;
  const CheckpointTensors ck(checkpoint);
  std::string format;
  try {
    format = ck.reader().string_attribute("format");
  } catch (const UserError&) {
    throw UserError("'" + checkpoint + "' is not a strata checkpoint (no format attribute)");
  }
  if (format != kCheckpointFormat)
    throw UserError("'" + checkpoint + "' has checkpoint format '" + format + "', this strata reads '" +
                    kCheckpointFormat + "'");
  const Deck deck =
      parse_model_deck(ck.reader().string_attribute("deck"), checkpoint + " (its deck)", {}, KeyEffect::Ignore);
  if (const std::string why = gpt2_export_refusal(deck.model); !why.empty())
    throw UserError("strata export: " + checkpoint + " cannot be written as GPT-2: " + why);
  // strata's tensors in the model's own order (a dry serial model declares them)
  Deck whole = deck;
  whole.parallel = Layout{};
  const auto model = make_model(whole, {}, 0, {}, false);
  std::vector<std::string> names;
  for (const auto& p : model->params().infos()) {
    if (!ck.reader().has_tensor("/params/" + p.name) || ck.reader().shape("/params/" + p.name) != p.shape)
      throw UserError("checkpoint '" + checkpoint + "': tensor /params/" + p.name + " is missing or misshapen");
    names.push_back(p.name);
  }
  const int64_t step = ck.reader().int_attribute("step");
  return opts.format == "hf" ? export_hf(checkpoint, ck, deck, names, opts, dtype, step)
                             : export_llmc(checkpoint, ck, deck, names, opts, dtype, step);
}

}  // namespace strata
