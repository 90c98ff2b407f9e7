// IDX files: the Fashion-MNIST files Debian ships read with their documented sizes, and
// every malformed file is refused with a message naming the file and the cause.
#include <zlib.h>

#include <sys/stat.h>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "io/idx_file.hpp"
#include "io/image_dataset.hpp"

using namespace strata;

namespace {
const char* kFashion = "/usr/share/datasets/fashion-mnist";

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
}

std::vector<uint8_t> idx_bytes(uint8_t type, std::vector<uint32_t> dims, size_t data_bytes) {
  std::vector<uint8_t> b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(uint8_t(i % 7));
  return b;
}

std::string error_of(const std::string& path, int rank) {
  try {
    read_idx(path, rank);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("IDX files: good ones read, plain or gzip; bad ones name the cause", "[io][idx]") {
  const std::string dir = "idx_test_files";
  ::mkdir(dir.c_str(), 0755);
  write_file(dir + "/good.gz", idx_bytes(8, {3, 2, 2}, 12), true);
  write_file(dir + "/good", idx_bytes(8, {3, 2, 2}, 12), false);
  for (const std::string name : {"good.gz", "good"}) {
    const IdxArray a = read_idx(dir + "/" + name, 3);
    CHECK(a.dims == std::vector<int64_t>{3, 2, 2});
    REQUIRE(a.data.size() == 12);
    CHECK(int(a.data[8]) == 1);
  }
  write_file(dir + "/magic", {1, 2, 8, 1, 0, 0, 0, 1, 5}, false);
  write_file(dir + "/type", idx_bytes(0x0d, {4}, 16), false);
  write_file(dir + "/rank", idx_bytes(8, {4}, 4), false);
  write_file(dir + "/short", idx_bytes(8, {10, 2, 2}, 39), true);
  write_file(dir + "/long", idx_bytes(8, {1, 2, 2}, 5), false);
  std::vector<uint8_t> gz;  // a gzip stream cut in half
  {
    write_file(dir + "/whole.gz", idx_bytes(8, {200, 10, 10}, 20000), true);
    std::ifstream f(dir + "/whole.gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(f), {});
    gz.resize(gz.size() / 2);
    write_file(dir + "/cut.gz", gz, false);
  }
  CHECK(error_of(dir + "/missing", 1) == "cannot open IDX file 'idx_test_files/missing'");
  CHECK(error_of(dir + "/magic", 1) == "IDX file 'idx_test_files/magic': bad magic number (not an IDX file)");
  CHECK(error_of(dir + "/type", 1) == "IDX file 'idx_test_files/type': element type 13, expected 8 (unsigned byte)");
  CHECK(error_of(dir + "/rank", 3) == "IDX file 'idx_test_files/rank': 1 dimensions, expected 3");
  CHECK(error_of(dir + "/short", 3) ==
        "IDX file 'idx_test_files/short': holds 39 data bytes, its header says 40 (truncated)");
  CHECK(error_of(dir + "/long", 3) ==
        "IDX file 'idx_test_files/long': holds 5 data bytes, its header says 4 (trailing bytes)");
  CHECK(error_of(dir + "/cut.gz", 3).find("IDX file 'idx_test_files/cut.gz'") == 0);
}

TEST_CASE("Fashion-MNIST from dataset-fashion-mnist: sizes, labels, epoch permutations", "[io][idx]") {
  ImageDataset data(kFashion, 42);
  CHECK(data.size(Split::Train) == 60000);
  CHECK(data.size(Split::Validation) == 10000);
  CHECK(data.pixels() == 784);
  // every training image once per epoch, a different order in the next epoch
  std::vector<char> seen(60000, 0);
  const int64_t batch = 100;
  for (int64_t step = 0; step < 600; ++step)
    for (int64_t i = 0; i < batch; ++i) seen[size_t(data.source_index(Split::Train, step, batch, i))] = 1;
  CHECK(std::count(seen.begin(), seen.end(), 1) == 60000);
  CHECK(data.source_index(Split::Train, 0, batch, 0) != data.source_index(Split::Train, 600, batch, 0));
  std::vector<float> img(784);
  int32_t label = -1;
  data.sample(Split::Validation, 0, batch, 0, img.data(), &label);
  CHECK(label == 9);  // the first test image is an ankle boot
  CHECK(*std::max_element(img.begin(), img.end()) <= 1.0f);
  CHECK(*std::max_element(img.begin(), img.end()) > 0.5f);
  CHECK_THROWS_WITH(ImageDataset("/nonexistent", 1),
                    "image dataset: no train-images-idx3-ubyte[.gz] in '/nonexistent'");
}
