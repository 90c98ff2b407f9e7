#pragma once
// Byte-level text: the bytes of a list of files (paths or globs) as one token stream,
// vocabulary 256. A deterministic split holds out val_fraction of fixed-size chunks for
// validation, chosen by hash so both splits mix every file.
#include <string>
#include <vector>

#include "io/token_source.hpp"

namespace strata {

class TextDataset : public TokenSource {
 public:
  static constexpr int64_t kChunkBytes = 4096;
  // Expands globs (sorted, deduplicated; fortune index files *.dat and *.u8 duplicates
  // are skipped). Throws UserError when a pattern matches nothing, a file cannot be read,
  // or a split is shorter than seq_len + 1 bytes.
  TextDataset(const std::vector<std::string>& patterns, double val_fraction, int64_t seq_len, uint64_t seed);

  void sequence(Split split, int64_t step, int64_t global_index, int64_t seq_len, int32_t* tokens,
                int32_t* targets) const override;

  double text_bytes(const int32_t*, int64_t n) const override { return double(n); }  // a token is a byte

  int64_t train_bytes() const { return int64_t(train_.size()); }
  int64_t val_bytes() const { return int64_t(val_.size()); }
  const std::vector<std::string>& files() const { return files_; }
  // "43 files, 2482466 train / 94208 validation bytes"
  std::string describe() const override {
    return std::to_string(files_.size()) + " files, " + std::to_string(train_bytes()) + " train / " +
           std::to_string(val_bytes()) + " validation bytes";
  }

  static std::vector<std::string> expand(const std::vector<std::string>& patterns);

 private:
  std::vector<std::string> files_;
  std::vector<unsigned char> train_, val_;
  uint64_t seed_;
};

}  // namespace strata
