#pragma once
// The parameters a rank declares: each tensor's global name and shape, the hyperslab of it
// this rank holds (the whole tensor without tensor parallelism), where that part lies in
// the flat buffers, and how it starts. Initial values are a pure function of (seed, name,
// global element index), so every rank layout starts from identical global weights.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

enum class Init { Normal, Zeros, Ones };

// The part of a global tensor this rank holds: a hyperslab (start, count per dimension;
// empty = the whole tensor), and how many ranks of the tensor group hold the same part.
// Replicas have identical values and gradients; replica 0 "owns" the part (counts it in
// norms, writes it to checkpoints).
// expert: an expert's parameter of a mixture-of-experts layer (kept after all others in
// the flat buffers: their gradients are summed over another group).
// tied: the parameter a model's first and last pipeline stage both hold (a GPT's token
// embedding and LM head), whose two copies' gradients are summed before an update.
struct Shard {
  std::vector<int64_t> start, count;
  int replica = 0, replicas = 1;
  bool expert = false;
  bool tied = false;
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;         // global shape
  std::vector<int64_t> start, count;  // this rank's hyperslab of it
  int replica = 0, replicas = 1;      // see Shard
  bool expert = false;                // see Shard
  bool tied = false;                  // see Shard
  // count is all 0 (numel 0) where another pipeline stage holds the parameter
  int64_t offset = 0;  // into the flat buffers
  int64_t numel = 0;   // of the local hyperslab
  int64_t global_numel = 0;
  Init init = Init::Zeros;
  double std = 0;           // for Init::Normal
  int64_t drawn_rows = -1;  // Init::Normal: rows (of dimension 0) below this are drawn, the rest zero (-1: all)
  bool decay = false;       // receives weight decay (2D weights do; biases and norms do not)
};

// Local element i of a shard (row-major over count) -> its global row-major index, on the
// host or in a kernel. Shapes are padded to 3 dimensions with leading 1s.
struct ShardIndex {
  int64_t g1 = 1, g2 = 1, s0 = 0, s1 = 0, s2 = 0, c1 = 1, c2 = 1;
  explicit ShardIndex(const ParamInfo& p) {
    const size_t nd = p.shape.size(), pad = 3 - nd;
    int64_t g[3] = {1, 1, 1}, st[3] = {0, 0, 0}, cn[3] = {1, 1, 1};
    for (size_t d = 0; d < nd; ++d) {
      g[pad + d] = p.shape[d];
      st[pad + d] = p.start[d];
      cn[pad + d] = p.count[d];
    }
    g1 = g[1], g2 = g[2], s0 = st[0], s1 = st[1], s2 = st[2], c1 = cn[1], c2 = cn[2];
  }
  KOKKOS_INLINE_FUNCTION int64_t global(int64_t i) const {
    const int64_t a = i / (c1 * c2), b = i / c2 % c1, c = i % c2;
    return ((a + s0) * g1 + (b + s1)) * g2 + (c + s2);
  }
};

// Parameter p's initial values at its local elements [from, from + dst.extent(0)), from
// the counter-based RNG (a free function: nvcc's device lambdas cannot live in private
// members).
template <class T>
void draw_initial(const ParamInfo& p, V1<T> dst, int64_t from, uint64_t seed);

class ParamTable {
 public:
  // Declares a tensor of global shape `shape` of which this rank holds `shard`; returns its
  // index. Experts' parameters lie after all others (expert_begin()).
  int add(const std::string& name, std::vector<int64_t> shape, Init init, double std, bool decay, Shard shard);
  // Only the first `rows` rows (dimension 0) of tensor i are drawn, the rest start at zero.
  void draw_rows_below(int i, int64_t rows) { infos_[size_t(i)].drawn_rows = rows; }
  int index(const std::string& name) const;
  const std::vector<ParamInfo>& infos() const { return infos_; }
  int64_t numel() const { return total_; }  // local elements (the flat buffers' length, but for padding)
  // Where the experts' parameters start: every other parameter lies in [0, expert_begin())
  // and the experts' in [expert_begin(), numel()), each part in the order of declaration.
  int64_t expert_begin() const { return expert_begin_; }
  // How many ways the experts are split over ranks (expert parallelism): an expert
  // tensor's leading dimension over this rank's part of it; 1 without experts.
  int expert_split() const;
  int64_t global_numel() const;  // elements of the whole model
  // The tied parameter (Shard::tied), declared on every stage; -1 when there is none.
  int tied_index() const;
  // A new layout of the flat buffers (ZeRO's padding): every parameter p moves to
  // moved(p), the buffers `total` long with the experts from `expert_begin`.
  void relay(const std::function<int64_t(const ParamInfo&)>& moved, int64_t total, int64_t expert_begin);

 private:
  std::vector<ParamInfo> infos_;
  std::unordered_map<std::string, int> by_name_;
  int64_t total_ = 0, dense_total_ = 0, expert_begin_ = 0;
};

}  // namespace strata
