#pragma once
// A classifier's batches (batch_source.hpp): each sample is an image's pixels and its
// label, from an ImageDataset; filled on the host, then copied once to device memory.
#include <memory>
#include <vector>

#include "core/log.hpp"
#include "core/tensor.hpp"
#include "data/batch_source.hpp"
#include "io/image_dataset.hpp"

namespace strata {

class ImageBatches : public BatchSource {
 public:
  ImageBatches(std::unique_ptr<ImageDataset> data, const BatchShape& shape, std::string dir)
      : data_(std::move(data)), shape_(shape), dir_(std::move(dir)) {}

  SampleBatch<float> load(Split split, int64_t step, int slot) override {
    const int64_t lb = shape_.local_batch();
    while (int(slots_.size()) <= slot) slots_.emplace_back(lb, data_->pixels());
    Slot& s = slots_[size_t(slot)];
    for (int64_t i = 0; i < lb; ++i)
      data_->sample(split, step, shape_.global_batch, replica_sample(shape_, i), &s.h_x(i, 0), &s.h_labels(i));
    Kokkos::deep_copy(s.x, s.h_x);
    Kokkos::deep_copy(s.labels, s.h_labels);
    SampleBatch<float> b;
    b.samples = lb;
    b.features = s.x;
    b.targets = s.labels;
    return b;
  }

  DataShape shape() const override { return {data_->pixels(), data_->classes()}; }

  std::string describe() const override {
    return strfmt("%lld train / %lld test images from %s", (long long)data_->size(Split::Train),
                  (long long)data_->size(Split::Validation), dir_.c_str());
  }

 private:
  struct Slot {
    Slot(int64_t samples, int64_t pixels)
        : x("images", samples, pixels), labels("labels", samples), h_x(Kokkos::create_mirror_view(x)),
          h_labels(Kokkos::create_mirror_view(labels)) {}
    Tensor2<float> x;
    Tensor1<int32_t> labels;
    typename Tensor2<float>::HostMirror h_x;
    typename Tensor1<int32_t>::HostMirror h_labels;
  };
  std::unique_ptr<ImageDataset> data_;
  BatchShape shape_;
  std::string dir_;
  std::vector<Slot> slots_;
};

}  // namespace strata
