#pragma once
// One rank's share of a global batch, on the device. Filled on the host from a
// TokenSource, then copied once to device memory.
#include "core/tensor.hpp"
#include "io/token_source.hpp"

namespace strata {

class Batch {
 public:
  Batch(int64_t local_batch, int64_t seq_len)
      : b_(local_batch), t_(seq_len), tokens_("tokens", b_ * t_), targets_("targets", b_ * t_),
        h_tokens_(Kokkos::create_mirror_view(tokens_)), h_targets_(Kokkos::create_mirror_view(targets_)) {}

  // Sequences first_global .. first_global + local_batch - 1 of (split, step).
  void load(const TokenSource& src, Split split, int64_t step, int64_t first_global) {
    for (int64_t i = 0; i < b_; ++i)
      src.sequence(split, step, first_global + i, t_, h_tokens_.data() + i * t_, h_targets_.data() + i * t_);
    Kokkos::deep_copy(tokens_, h_tokens_);
    Kokkos::deep_copy(targets_, h_targets_);
  }
  V1<const int32_t> tokens() const { return tokens_; }
  V1<const int32_t> targets() const { return targets_; }
  int64_t local_batch() const { return b_; }

 private:
  int64_t b_, t_;
  Tensor1<int32_t> tokens_, targets_;
  typename Tensor1<int32_t>::HostMirror h_tokens_, h_targets_;
};

}  // namespace strata
