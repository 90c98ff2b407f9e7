#pragma once
// A subword tokenizer: SentencePiece (Debian's libsentencepiece), trained here on a
// corpus's lines or loaded from a user's .model file (e.g. one shipped with a published
// model). The models strata trains are lossless: identity normalization, whitespace kept as
// it is, no dummy prefix, "\n" a piece of its own and byte fallback for any character not
// in the vocabulary, so decode(encode(text)) == text for any bytes that are valid UTF-8.
// SentencePiece itself stays inside tokenizer.cpp.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata {

struct TokenizerTraining {
  std::string type = "bpe";         // "bpe" or "unigram"
  int64_t vocab_size = 4096;        // pieces, including <unk>, "\n" and the 256 byte pieces
  int64_t max_sentences = 2000000;  // lines sampled from the corpus for training (0: all)
};

class Tokenizer {
 public:
  // Throws UserError naming the file when it is missing or not a SentencePiece model.
  static Tokenizer load(const std::string& path);
  // A serialized model (a .model file's bytes); origin names it in errors.
  static Tokenizer from_serialized(const std::string& model, const std::string& origin);
  // Trains on the lines of files (read as a stream, sampled down to max_sentences).
  // Throws UserError with SentencePiece's reason when training fails (e.g. a vocabulary too
  // small for the corpus's characters).
  static Tokenizer train(const std::vector<std::string>& files, const TokenizerTraining& spec);

  int64_t vocab_size() const;
  std::vector<uint32_t> encode(const std::string& text) const;
  // Throws UserError for an id outside the vocabulary.
  std::string decode(const std::vector<uint32_t>& ids) const;
  // Bytes of text each token stands for (byte pieces 1, control and unknown 0, "▁" one
  // space): what bits per byte divide by.
  const std::vector<uint8_t>& text_bytes() const { return text_bytes_; }
  // The model's bytes, as a .model file holds them.
  const std::string& serialized() const { return serialized_; }
  // Writes the .model file through a temporary file renamed into place; throws UserError
  // naming the file when it cannot be written completely.
  void save(const std::string& path) const;

 private:
  Tokenizer() = default;
  struct Processor;
  std::shared_ptr<const Processor> sp_;
  std::string serialized_;
  std::vector<uint8_t> text_bytes_;
};

}  // namespace strata
