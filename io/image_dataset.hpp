#pragma once
// An image classification dataset in the MNIST layout (Fashion-MNIST from Debian's
// dataset-fashion-mnist, or MNIST): train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte in one directory, gzip-compressed or
// not. Pixels are scaled to [0, 1]. The training split is visited in a fresh permutation
// every epoch, a pure function of (seed, epoch), so sample i of step s is the same for
// any rank layout and after a restart; the validation split is the test set, in order.
#include <cstdint>
#include <string>
#include <vector>

#include "io/token_source.hpp"

namespace strata {

class ImageDataset {
 public:
  // Throws UserError naming the file for a missing or malformed file, image and label
  // counts that differ, a label outside [0, classes), or train and test images of
  // different sizes.
  ImageDataset(const std::string& dir, uint64_t seed, int classes = 10);

  int64_t size(Split split) const { return split == Split::Train ? train_labels_.size() : test_labels_.size(); }
  int64_t pixels() const { return pixels_; }  // per image (784)
  int classes() const { return classes_; }
  // The image (pixels() floats) and label of sample `index` of a step of `batch` samples.
  // Train: element step * batch + index of the epoch-wise permuted order. Validation:
  // test image (step * batch + index) mod size.
  void sample(Split split, int64_t step, int64_t batch, int64_t index, float* image, int32_t* label) const;
  // Which stored image that is (for tests).
  int64_t source_index(Split split, int64_t step, int64_t batch, int64_t index) const;

 private:
  const std::vector<int64_t>& permutation(int64_t epoch) const;
  int64_t pixels_ = 0;
  int classes_ = 10;
  uint64_t seed_;
  std::vector<uint8_t> train_images_, test_images_;
  std::vector<uint8_t> train_labels_, test_labels_;
  mutable int64_t perm_epoch_ = -1;
  mutable std::vector<int64_t> perm_;
};

}  // namespace strata
