#include "io/text_dataset.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/file_globs.hpp"

namespace strata {
namespace {

bool text_dataset_skips(const std::string& p) {
  // fortune's random-access indexes (.dat) and UTF-8 duplicates (.u8) are not text
  const auto ends_with = [&](const std::string& suffix) {
    return p.size() >= suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".dat") || ends_with(".u8");
}

}  // namespace

std::vector<std::string> TextDataset::expand(const std::vector<std::string>& patterns) {
  return expand_globs(patterns, "data.files", "text file", text_dataset_skips);
}

TextDataset::TextDataset(const std::vector<std::string>& patterns, double val_fraction, int64_t seq_len, uint64_t seed)
    : files_(expand(patterns)), seed_(seed) {
  std::vector<unsigned char> all;
  for (const auto& f : files_) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw UserError("data.files: cannot read '" + f + "'");
    all.insert(all.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const uint64_t threshold = uint64_t(val_fraction * 1e6);
  for (size_t start = 0, chunk = 0; start < all.size(); start += kChunkBytes, ++chunk) {
    const size_t end = std::min(all.size(), start + size_t(kChunkBytes));
    auto& dst = (counter_hash(0x5EED5A17u, 0, chunk) % 1000000) < threshold ? val_ : train_;
    dst.insert(dst.end(), all.begin() + start, all.begin() + end);
  }
  const auto need = size_t(seq_len) + 1;
  if (train_.size() < need || val_.size() < need)
    throw UserError("data.files: " + std::to_string(all.size()) + " bytes in " + std::to_string(files_.size()) +
                    " files give a train/validation split of " + std::to_string(train_.size()) + "/" +
                    std::to_string(val_.size()) +
                    " bytes; each needs at least model.seq_len + 1 = " + std::to_string(need));
}

void TextDataset::sequence(Split split, int64_t step, int64_t global_index, int64_t seq_len, int32_t* tokens,
                           int32_t* targets) const {
  const auto& src = split == Split::Train ? train_ : val_;
  const uint64_t span = uint64_t(src.size()) - uint64_t(seq_len);  // valid starts: [0, span)
  const uint64_t start = counter_hash(seed_ ^ uint64_t(split), uint64_t(step), uint64_t(global_index)) % span;
  for (int64_t t = 0; t < seq_len; ++t) {
    tokens[t] = src[start + t];
    targets[t] = src[start + t + 1];
  }
}

}  // namespace strata
