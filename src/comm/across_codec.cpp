#include "comm/across_codec.hpp"

#include "core/error.hpp"

namespace strata {

std::vector<float> AcrossCodec::state() const {
  std::vector<float> all;
  for (const auto& s : states_) all.insert(all.end(), s.begin(), s.end());
  return all;
}

void AcrossCodec::restore(std::vector<float> values) {
  restored_ = std::move(values);
  restored_used_ = 0;
}

std::vector<float>& AcrossCodec::block_state(const float* block, int64_t values) {
  const auto [it, added] = index_.emplace(block, states_.size());
  if (added) {
    std::vector<float> s(size_t(values), 0.0f);
    // a checkpoint's rows are padded to the longest rank's: a block past this rank's
    // values would read the padding, which a run on the same layout never does
    if (restored_used_ + size_t(values) <= restored_.size()) {
      std::copy(restored_.begin() + long(restored_used_), restored_.begin() + long(restored_used_ + size_t(values)),
                s.begin());
      restored_used_ += size_t(values);
    }
    states_.push_back(std::move(s));
  }
  std::vector<float>& s = states_[it->second];
  if (int64_t(s.size()) != values)
    throw StrataError("the " + name() + " codec's block of " + std::to_string(values) + " values was " +
                          std::to_string(s.size()) + " before",
                      kExitInternal);
  return s;
}

}  // namespace strata
