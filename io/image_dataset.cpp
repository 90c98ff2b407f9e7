#include "io/image_dataset.hpp"

#include <sys/stat.h>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "io/idx_file.hpp"

namespace strata {
namespace {

// dir/name.gz, or dir/name when only the uncompressed file exists.
std::string find_file(const std::string& dir, const std::string& name) {
  struct stat st;
  for (const std::string& candidate : {dir + "/" + name + ".gz", dir + "/" + name})
    if (::stat(candidate.c_str(), &st) == 0) return candidate;
  throw UserError("image dataset: no " + name + "[.gz] in '" + dir + "'");
}

}  // namespace

ImageDataset::ImageDataset(const std::string& dir, uint64_t seed, int classes) : classes_(classes), seed_(seed) {
  const auto load = [&](const std::string& prefix, std::vector<uint8_t>& images, std::vector<uint8_t>& labels) {
    const std::string image_path = find_file(dir, prefix + "-images-idx3-ubyte");
    const std::string label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
    IdxArray im = read_idx(image_path, 3), lb = read_idx(label_path, 1);
    if (im.dims[0] != lb.dims[0])
      throw UserError("image dataset: '" + image_path + "' holds " + std::to_string(im.dims[0]) + " images but '" +
                      label_path + "' " + std::to_string(lb.dims[0]) + " labels");
    const int64_t px = im.dims[1] * im.dims[2];
    if (pixels_ != 0 && px != pixels_)
      throw UserError("image dataset: '" + image_path + "' has images of " + std::to_string(px) +
                      " pixels, the other split " + std::to_string(pixels_));
    pixels_ = px;
    for (size_t i = 0; i < lb.data.size(); ++i)
      if (lb.data[i] >= classes_)
        throw UserError("image dataset: '" + label_path + "': label " + std::to_string(int(lb.data[i])) +
                        " of sample " + std::to_string(i) + " is not in [0, " + std::to_string(classes_) + ")");
    images = std::move(im.data);
    labels = std::move(lb.data);
  };
  load("train", train_images_, train_labels_);
  load("t10k", test_images_, test_labels_);
}

const std::vector<int64_t>& ImageDataset::permutation(int64_t epoch) const {
  if (perm_epoch_ == epoch) return perm_;
  const int64_t n = int64_t(train_labels_.size());
  perm_.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) perm_[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates from counter-based draws
    const int64_t j = int64_t(counter_hash(seed_, 0x5eedu + uint64_t(epoch), uint64_t(i)) % uint64_t(i + 1));
    std::swap(perm_[i], perm_[j]);
  }
  perm_epoch_ = epoch;
  return perm_;
}

int64_t ImageDataset::source_index(Split split, int64_t step, int64_t batch, int64_t index) const {
  const int64_t g = step * batch + index, n = size(split);
  if (split == Split::Validation) return g % n;
  return permutation(g / n)[size_t(g % n)];
}

void ImageDataset::sample(Split split, int64_t step, int64_t batch, int64_t index, float* image, int32_t* label) const {
  const int64_t k = source_index(split, step, batch, index);
  const auto& images = split == Split::Train ? train_images_ : test_images_;
  const auto& labels = split == Split::Train ? train_labels_ : test_labels_;
  const uint8_t* px = images.data() + k * pixels_;
  for (int64_t p = 0; p < pixels_; ++p) image[p] = float(px[p]) * (1.0f / 255.0f);
  *label = int32_t(labels[size_t(k)]);
}

}  // namespace strata
