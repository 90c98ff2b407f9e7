#pragma once
// A slice of Fashion-MNIST for the tests' image runs: the first 1024 training and 256 test
// images with their labels, written once as plain IDX files. The MPI tests start dozens of
// image runs, each of which would otherwise inflate the whole 55 MB dataset again; what
// they test (equivalence of layouts, restarts) does not depend on the dataset's size.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/idx_file.hpp"

namespace strata::test {

inline constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

// dir/name: the first `keep` items of the dataset's file. Processes running side by side
// (ranks, CTest's jobs) write the same bytes; each writes a file of its own and renames
// it into place, so no reader sees a partial file.
inline void write_idx_slice(const std::string& dir, const std::string& name, int rank, int64_t keep) {
  const std::string path = dir + "/" + name;
  IdxArray a = read_idx(std::string(kFashionMnist) + "/" + name + ".gz", rank);
  const int64_t item = int64_t(a.data.size()) / a.dims[0];
  a.dims[0] = std::min(a.dims[0], keep);
  const std::string tmp = path + "." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    const char head[4] = {0, 0, 8, char(rank)};
    out.write(head, 4);
    for (int64_t d : a.dims) {
      const char be[4] = {char(d >> 24), char(d >> 16), char(d >> 8), char(d)};
      out.write(be, 4);
    }
    out.write(reinterpret_cast<const char*>(a.data.data()), std::streamsize(a.dims[0] * item));
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
}

// The slice's directory (in the working directory, made on first use).
inline std::string test_image_dir() {
  static const std::string dir = [] {
    const std::string d = "fashion_mnist_slice";
    ::mkdir(d.c_str(), 0755);
    struct stat st {};
    for (const auto& [split, count] : {std::pair<std::string, int64_t>{"train", 1024}, {"t10k", 256}}) {
      const std::string images = split + "-images-idx3-ubyte", labels = split + "-labels-idx1-ubyte";
      if (::stat((d + "/" + images).c_str(), &st) != 0 || st.st_size != 16 + count * 784)
        write_idx_slice(d, images, 3, count);
      if (::stat((d + "/" + labels).c_str(), &st) != 0 || st.st_size != 8 + count) write_idx_slice(d, labels, 1, count);
    }
    return d;
  }();
  return dir;
}

}  // namespace strata::test
