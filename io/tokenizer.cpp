#include "io/tokenizer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace strata {

struct Tokenizer::Processor {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {

// The lines of a list of files, read as a stream (SentencePiece samples them).
class FileLines : public sentencepiece::SentenceIterator {
 public:
  explicit FileLines(const std::vector<std::string>& files) : files_(files) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  void advance() {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (in_.is_open() && in_.bad()) {
        status_ =
            sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, "cannot read " + files_[next_ - 1]);
        done_ = true;
        return;
      }
      in_.close();
      in_.clear();
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_.open(files_[next_++], std::ios::binary);
      if (!in_) {
        status_ =
            sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, "cannot read " + files_[next_ - 1]);
        done_ = true;
        return;
      }
    }
  }
  const std::vector<std::string>& files_;
  size_t next_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

std::vector<uint8_t> text_bytes_of(const sentencepiece::SentencePieceProcessor& sp) {
  static const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's whitespace mark
  std::vector<uint8_t> out(size_t(sp.GetPieceSize()), 0);
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    if (sp.IsControl(id) || sp.IsUnknown(id)) continue;
    if (sp.IsByte(id)) {
      out[size_t(id)] = 1;
      continue;
    }
    const std::string piece = sp.IdToPiece(id);
    size_t n = 0;
    for (size_t i = 0; i < piece.size();)
      if (piece.compare(i, kSpace.size(), kSpace) == 0) {
        ++n;
        i += kSpace.size();
      } else {
        ++n;
        ++i;
      }
    out[size_t(id)] = uint8_t(std::min<size_t>(n, 255));
  }
  return out;
}

}  // namespace

Tokenizer Tokenizer::from_serialized(const std::string& model, const std::string& origin) {
  auto p = std::make_shared<Processor>();
  const auto st = p->sp.LoadFromSerializedProto(model);
  if (!st.ok()) throw UserError(origin + ": not a SentencePiece model (" + st.ToString() + ")");
  Tokenizer t;
  t.serialized_ = model;
  t.text_bytes_ = text_bytes_of(p->sp);
  t.sp_ = std::move(p);
  return t;
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot read the tokenizer model");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from_serialized(bytes, path);
}

Tokenizer Tokenizer::train(const std::vector<std::string>& files, const TokenizerTraining& spec) {
  if (spec.type != "bpe" && spec.type != "unigram")
    throw UserError("tokenizer type must be \"bpe\" or \"unigram\" (got \"" + spec.type + "\")");
  const std::unordered_map<std::string, std::string> options = {
      {"model_type", spec.type},
      {"vocab_size", std::to_string(spec.vocab_size)},
      // lossless: the text as it is, every byte representable
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"user_defined_symbols", "\n"},  // lines are the training sentences; "\n" joins them
      {"split_digits", "true"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"unk_surface", ""},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", std::to_string(spec.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", "1"},
      {"minloglevel", "2"},
  };
  FileLines lines(files);
  std::string model;
  const auto st = sentencepiece::SentencePieceTrainer::Train(options, &lines, &model);
  if (!st.ok())
    throw UserError("training the " + spec.type + " tokenizer of " + std::to_string(spec.vocab_size) +
                    " pieces failed: " + st.ToString());
  return from_serialized(model, "the trained tokenizer");
}

int64_t Tokenizer::vocab_size() const { return sp_->sp.GetPieceSize(); }

std::vector<uint32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto st = sp_->sp.Encode(text, &ids);
  if (!st.ok()) throw UserError("the tokenizer cannot encode the text: " + st.ToString());
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  std::vector<int> v;
  v.reserve(ids.size());
  for (uint32_t id : ids) {
    if (int64_t(id) >= vocab_size())
      throw UserError("token " + std::to_string(id) + " is outside the tokenizer's vocabulary of " +
                      std::to_string(vocab_size()));
    v.push_back(int(id));
  }
  std::string text;
  const auto st = sp_->sp.Decode(v, &text);
  if (!st.ok()) throw UserError("the tokenizer cannot decode: " + st.ToString());
  return text;
}

void Tokenizer::save(const std::string& path) const {
  write_file_atomically(path, serialized_.data(), serialized_.size());
}

}  // namespace strata
