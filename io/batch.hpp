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

  // Data replica `replica` of `replicas`' share of (split, step) when the global batch is
  // cut into micro_batches micro-batches: its local micro-batch j is its part of global
  // micro-batch j, so each micro-batch holds the same sequences on any number of replicas
  // (XPipe runs micro-batches of one step on different weight versions).
  void load(const TokenSource& src, Split split, int64_t step, int64_t replica = 0, int64_t replicas = 1,
            int64_t micro_batches = 1) {
    const int64_t per_micro = b_ / micro_batches;
    for (int64_t i = 0; i < b_; ++i) {
      const int64_t global = (i / per_micro) * per_micro * replicas + replica * per_micro + i % per_micro;
      src.sequence(split, step, global, t_, h_tokens_.data() + i * t_, h_targets_.data() + i * t_);
    }
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
