// Every tensor split's parts of a parameter (TensorParallel::part_of, from the cuts a block
// declares): over the split's ranks, the copies numbered 0 tile the global tensor exactly
// once, every element is held by as many ranks as the part's replica count says, and the
// copies of one part agree on it. The parameters are the transformer block's and the
// vocabulary end's, with the cuts their blocks declare (model/transformer_block.cpp,
// embedding_block.cpp, lm_head.cpp). A new split's part_of is held to the same.
#include <array>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "parallel/tensor_parallel.hpp"

using namespace strata;

namespace {

struct SplitParam {
  std::string name;
  std::vector<int64_t> shape;
  TensorCuts cuts;
};

// the GPT's parameters at C = 24, V = 48 (divisible by every split below)
std::vector<SplitParam> split_params() {
  const int64_t c = 24, v = 48, t = 16;
  return {
      {"ln1.weight", {c}, {-1, -1, 0, 0, -1, -1}},      {"attn.qkv.weight", {c, 3, c}, {2, 0, 2, 0, 2, 0}},
      {"attn.qkv.bias", {3, c}, {1, -1, 1, -1, 1, -1}}, {"attn.proj.weight", {c, c}, {0, 0, 1, 1, 0, 0}},
      {"attn.proj.bias", {c}, {-1, -1, 0, 0, -1, -1}},  {"mlp.fc.weight", {c, 4 * c}, {1, 0, 1, 0, 1, 0}},
      {"mlp.fc.bias", {4 * c}, {0, -1, 0, -1, 0, -1}},  {"wte", {v, c}, {0, 0, 1, 1, 0, -1}},
      {"wpe", {t, c}, {-1, -1, 1, 1, -1, -1}},          {"router", {c, 4}, {-1, -1, -1, -1, -1, -1}},
  };
}

// every rank of a split, with its coordinates
std::vector<TensorParallel> split_ranks(const std::string& split) {
  std::vector<TensorParallel> out;
  if (split == "1d:4")
    for (int r = 0; r < 4; ++r) out.push_back(ColumnSplit{nullptr, 4, r, false});
  if (split == "2d:2x2")
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) out.push_back(OptimusSplit{nullptr, nullptr, nullptr, 2, i, j});
  const std::map<std::string, std::array<int, 3>> axonn = {
      {"3d:2x1x2", {2, 1, 2}}, {"3d:1x2x2", {1, 2, 2}}, {"3d:2x2x2", {2, 2, 2}}, {"3d:1x1x4", {1, 1, 4}}};
  if (axonn.count(split)) {
    const auto [nx, ny, nz] = axonn.at(split);
    for (int z = 0; z < nz; ++z)
      for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x) {
          AxonnSplit s;
          s.nx = nx, s.ny = ny, s.nz = nz, s.ix = x, s.iy = y, s.iz = z;
          out.push_back(s);
        }
  }
  if (split == "none") out.push_back(WholeTensors{});
  return out;
}

// calls f(flat index) for every element of a part of `shape`
void each_part_element(const std::vector<int64_t>& shape, const TensorPart& p, const std::function<void(int64_t)>& f) {
  std::vector<int64_t> start = p.whole ? std::vector<int64_t>(shape.size(), 0) : p.start;
  std::vector<int64_t> count = p.whole ? shape : p.count;
  int64_t n = 1;
  for (const int64_t c : count) n *= c;
  for (int64_t e = 0; e < n; ++e) {
    int64_t rest = e, flat = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t at = start[d] + rest % count[d];
      rest /= count[d];
      int64_t stride = 1;
      for (size_t k = d + 1; k < shape.size(); ++k) stride *= shape[k];
      flat += at * stride;
    }
    f(flat);
  }
}

}  // namespace

TEST_CASE("every tensor split's parts of a parameter tile it, each element held by as many ranks as its copies",
          "[parallel][tensor_parts]") {
  for (const std::string split : {"none", "1d:4", "2d:2x2", "3d:2x1x2", "3d:1x2x2", "3d:2x2x2", "3d:1x1x4"}) {
    const std::vector<TensorParallel> ranks = split_ranks(split);
    REQUIRE(int(ranks.size()) == ranks.front().size());
    for (const SplitParam& param : split_params()) {
      INFO(split << " " << param.name);
      int64_t numel = 1;
      for (const int64_t d : param.shape) numel *= d;
      std::vector<int> first_copies(size_t(numel), 0), holders(size_t(numel), 0), copies(size_t(numel), 0);
      for (const TensorParallel& rank : ranks) {
        const TensorPart part = rank.part_of(param.shape, param.cuts);
        REQUIRE(part.replica < part.replicas);
        each_part_element(param.shape, part, [&](int64_t e) {
          if (part.replica == 0) ++first_copies[size_t(e)];
          ++holders[size_t(e)];
          copies[size_t(e)] = part.replicas;
        });
      }
      for (int64_t e = 0; e < numel; ++e) {
        REQUIRE(first_copies[size_t(e)] == 1);
        REQUIRE(holders[size_t(e)] == copies[size_t(e)]);
      }
    }
  }
}

TEST_CASE("the splits are listed once, by name, in the order strata plan prints them", "[parallel][tensor_parts]") {
  CHECK(TensorParallel::kind_names() == std::vector<const char*>{"none", "1d", "2d", "3d"});
  Layout l;
  CHECK(std::string(tensor_split_of(l).name()) == "none");
  l.split_columns(2, true);
  CHECK(tensor_split_of(l).as<ColumnSplit>()->sequence);
  CHECK(tensor_split_of(l).row_split() == 2);
  l.split_grid(1);  // 2D even at q = 1: the 2D code path
  CHECK(std::string(tensor_split_of(l).name()) == "2d");
  l.split_axonn(2, 1, 2);
  CHECK(tensor_split_of(l).size() == 4);
  CHECK(tensor_split_of(l).traits().batch.parts == 2);
  CHECK(expert_ranks(l) == 4);
  l.split_grid(2);
  CHECK(expert_ranks(l) == 1);  // the 2D split routes no rows
}
