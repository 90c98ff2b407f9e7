#pragma once
// A language model's batches (batch_source.hpp): each sample is a sequence of seq_len
// tokens and its seq_len next tokens, from a TokenSource; filled on the host, then copied
// once to device memory.
#include <memory>
#include <vector>

#include "core/tensor.hpp"
#include "data/batch_source.hpp"

namespace strata {

class TokenBatches : public BatchSource {
 public:
  TokenBatches(std::shared_ptr<const TokenSource> source, const BatchShape& shape, int64_t seq_len)
      : source_(std::move(source)), shape_(shape), t_(seq_len) {}

  SampleBatch<float> load(Split split, int64_t step, int slot) override {
    while (int(slots_.size()) <= slot) slots_.emplace_back(shape_.local_batch() * t_);
    Slot& s = slots_[size_t(slot)];
    for (int64_t i = 0; i < shape_.local_batch(); ++i)
      source_->sequence(split, step, replica_sample(shape_, i), t_, s.h_tokens.data() + i * t_,
                        s.h_targets.data() + i * t_);
    Kokkos::deep_copy(s.tokens, s.h_tokens);
    Kokkos::deep_copy(s.targets, s.h_targets);
    SampleBatch<float> b;
    b.samples = shape_.local_batch();
    b.tokens = s.tokens;
    b.targets = s.targets;
    return b;
  }

  std::string describe() const override { return source_->describe(); }

  double text_bytes(Split split, int64_t batches) const override {
    std::vector<int32_t> tok(static_cast<size_t>(t_)), tgt(static_cast<size_t>(t_));
    double bytes = 0;
    for (int64_t j = 0; j < batches; ++j)
      for (int64_t i = 0; i < shape_.global_batch; ++i) {
        source_->sequence(split, j, i, t_, tok.data(), tgt.data());
        bytes += source_->text_bytes(tgt.data(), t_);
      }
    return bytes;
  }

 private:
  struct Slot {
    explicit Slot(int64_t n)
        : tokens("tokens", n), targets("targets", n), h_tokens(Kokkos::create_mirror_view(tokens)),
          h_targets(Kokkos::create_mirror_view(targets)) {}
    Tensor1<int32_t> tokens, targets;
    typename Tensor1<int32_t>::HostMirror h_tokens, h_targets;
  };
  std::shared_ptr<const TokenSource> source_;
  BatchShape shape_;
  int64_t t_;
  std::vector<Slot> slots_;
};

}  // namespace strata
