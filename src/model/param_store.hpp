#pragma once
// Parameter store: this rank's parameter shards in one flat buffer, with gradients and the
// AdamW moments in flat buffers of the same layout, and a named view per tensor (as
// llm.c does). Each tensor has a global name and shape, and this rank holds a hyperslab
// of it (the whole tensor without tensor parallelism). Initial values are a pure function
// of (seed, name, global element index), so every rank layout starts from identical
// global weights.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/tensor.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/products.hpp"
#include "model/gradient_slots.hpp"
#include "model/param_gather.hpp"

namespace strata {

enum class Init { Normal, Zeros, Ones };

// The part of a global tensor this rank holds: a hyperslab (start, count per dimension;
// empty = the whole tensor), and how many ranks of the tensor group hold the same part.
// Replicas have identical values and gradients; replica 0 "owns" the part (counts it in
// norms, writes it to checkpoints).
// expert: an expert's parameter of a mixture-of-experts layer (ParamStore keeps these
// after all others in the flat buffers: their gradients are summed over another group).
struct Shard {
  std::vector<int64_t> start, count;
  int replica = 0, replicas = 1;
  bool expert = false;
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;         // global shape
  std::vector<int64_t> start, count;  // this rank's hyperslab of it
  int replica = 0, replicas = 1;      // see Shard
  bool expert = false;                // see Shard
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

// ZeRO-1's block of a flat buffer of `numel` values split over `shards` ranks: equal
// blocks, the last padded (so reduce-scatters and all-gathers need no counts).
inline int64_t zero_block(int64_t numel, int shards) { return (numel + shards - 1) / shards; }
// Values a store of numel values holds: parameters and gradients (padded to `shards`
// blocks) and the AdamW moments of one block; 4 numel without ZeRO-1 (shards = 1).
inline int64_t store_values(int64_t numel, int shards) { return 2 * zero_block(numel, shards) * (shards + 1); }

template <class T>
class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;  // its rounded copy points at its change count
  ParamStore& operator=(const ParamStore&) = delete;
  // Declares a tensor of global shape `shape` of which this rank holds `shard`; returns its
  // index. All declarations come before allocate().
  int add(const std::string& name, std::vector<int64_t> shape, Init init, double std = 0, bool decay = false,
          Shard shard = {});
  // Only the first `rows` rows (dimension 0) of tensor i are drawn, the rest start at zero
  // (a vocabulary's padding); before allocate().
  void draw_rows_below(int i, int64_t rows) { infos_[size_t(i)].drawn_rows = rows; }
  // Allocates the flat buffers and fills parameters from the counter-based RNG; with
  // state = false the parameters only (the ZeRO stages' sharding allocates the rest, so a
  // rank never holds the unsharded gradients and moments); with draw = false the parameters
  // are left zero for a caller that writes every value (model.init_from).
  void allocate(uint64_t seed, bool state = true, bool draw = true);
  // In place of allocate() where shard_parameters follows (ZeRO-3): nothing is allocated,
  // and shard_parameters draws this rank's parts of the initial values straight into its
  // owned parameters, so no rank ever holds the whole parameters either.
  void defer_values(uint64_t seed) { deferred_seed_ = seed; }
  // Parameter p's initial values at its local elements [from, from + dst.extent(0)), from
  // the counter-based RNG (public: nvcc's device lambdas cannot live in private members).
  static void draw(const ParamInfo& p, V1<T> dst, int64_t from, uint64_t seed);
  // ZeRO stage 1, after allocate(): the flat buffers are padded with zeros to `shards`
  // equal blocks (zero_block) and this rank keeps the AdamW moments of block `index` only;
  // every parameter and gradient stays (the gradients summed over the block only).
  // expert_shards > 0 (expert parallelism): the parameters before expert_begin() are
  // padded to `shards` blocks and the experts' after them to `expert_shards` blocks (their
  // own group: the expert replicas), and the rank keeps block `index` of the first and
  // block `expert_index` of the second (block_region says where each region lies).
  void shard_moments(int shards, int index, int expert_shards = 0, int expert_index = 0);
  // ZeRO stage 2, after allocate(): the flat buffers laid out unit by unit (units: the
  // ranges whose gradients become final together, StageModel::grad_ready_order(); the
  // flat buffer's other ranges and the experts' region are units of their own), each
  // padded to `shards` equal parts (the experts' region to `expert_shards` parts when
  // expert_shards > 0: their own group, the expert replicas); this rank keeps part `index`
  // (`expert_index`) of every unit's summed gradient and AdamW moments, and every
  // parameter. grad(i) is then a working slot of its unit's gradient, until the engine
  // reduce-scatters the unit into this rank's part (model/gradient_slots.hpp).
  void shard_gradients(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                       int expert_shards = 0, int expert_index = 0);
  // ZeRO stage 3, after defer_values() (in place of shard_gradients, with its arguments):
  // the units of ZeRO-2, and this rank keeps its part of every unit's parameters too
  // (owned_params(), in the order of its moments, drawn there) and no flat parameters; a unit's whole
  // parameters exist while a pass's step uses them (use_params), gathered over `data` (the
  // experts' region over `expert_data`) as `policy` says (model/param_gather.hpp).
  void shard_parameters(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                        int expert_shards, int expert_index, Comm& data, Comm& expert_data, GatherPolicy policy);
  // ZeRO-2's units and their working slots (nullptr otherwise).
  GradientSlots<T>* gradient_slots() const { return slots_.get(); }
  bool gradients_sharded() const { return bool(slots_); }
  // ZeRO-3's gathers (nullptr otherwise).
  const ParamGather<T>* param_gather() const { return gather_.get(); }
  bool params_sharded() const { return bool(gather_); }
  // A step of a pass (ZeRO-3; nothing otherwise): the units that hold the flat ranges of
  // steps[k] gathered for reading, those of the next steps posted (as many as the
  // prefetch depth), the others given back. Every rank of a replica group names the same
  // steps.
  void use_params(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& steps, size_t k);

  int index(const std::string& name) const;
  const std::vector<ParamInfo>& infos() const { return infos_; }
  int64_t numel() const { return total_; }  // local elements (the flat buffers' length, but for padding)
  // Where the experts' parameters start: the flat buffers hold every other parameter in
  // [0, expert_begin()) and the experts' in [expert_begin(), numel()), each part in the
  // order of declaration (with ZeRO-1 over two regions, the first padded to its blocks).
  int64_t expert_begin() const { return expert_begin_; }
  // How many ways the experts are split over ranks (expert parallelism): an expert
  // tensor's leading dimension over this rank's part of it; 1 without experts.
  int expert_split() const {
    for (const auto& p : infos_)
      if (p.expert && p.count[0] > 0) return int(p.shape[0] / p.count[0]);
    return 1;
  }
  int64_t global_numel() const;  // elements of the whole model

  // (ZeRO-3: in its unit's gathered slot, which a step of the pass took: use_params)
  V1<T> param(int i) const {
    return gather_ ? gather_->values(infos_[i].offset, infos_[i].numel)
                   : V1<T>(params_.data() + infos_[i].offset, infos_[i].numel);
  }
  // (ZeRO-2: its unit's working slot, taken at the first call of a backward)
  V1<T> grad(int i) const {
    return slots_ ? slots_->values(infos_[i].offset, infos_[i].numel)
                  : V1<T>(grads_.data() + infos_[i].offset, infos_[i].numel);
  }
  // 2D views of the local part: (count[0], product of the other counts).
  V2<T> param2(int i) const {
    const auto& p = infos_[i];
    return gather_ && p.numel > 0 ? as_matrix(param(i).data(), p.count[0], p.numel / p.count[0]) : matrix(params_, i);
  }
  V2<T> grad2(int i) const {
    const auto& p = infos_[i];
    return slots_ && p.numel > 0 ? as_matrix(grad(i).data(), p.count[0], p.numel / p.count[0]) : matrix(grads_, i);
  }
  // Rows [r0, r1) of parameter i's 2D view (ZeRO-3: they lie in one unit, e.g. a chunk of
  // the vocabulary, which may be all a step gathered of the parameter).
  V2<T> param_rows(int i, int64_t r0, int64_t r1) const { return rows_of(i, r0, r1, false); }
  V2<T> grad_rows(int i, int64_t r0, int64_t r1) const { return rows_of(i, r0, r1, true); }
  bool held(int i) const { return infos_[i].numel > 0; }

  // The parameters for writing: every call counts as a change, so that what is made from
  // them (the bf16 copy) is made again before it is next read.
  // (ZeRO-3 keeps none: owned_params)
  Tensor1<T>& params() {
    ++changes_;
    return flat_params();
  }
  const Tensor1<T>& params() const { return const_cast<ParamStore*>(this)->flat_params(); }
  // ZeRO-3: this rank's part of every unit's parameters (at each unit's `at`), for writing:
  // the units gathered so far are given back first.
  Tensor1<T>& owned_params() {
    if (gather_) gather_->release_all();
    return owned_params_;
  }
  // The parameters this rank keeps: the flat buffer, or under ZeRO-3 its owned parts.
  V1<const T> param_values() const { return gather_ ? V1<const T>(owned_params_) : V1<const T>(params_); }
  // The flat gradients (empty under ZeRO-2, which keeps its part: moment_grads).
  Tensor1<T>& grads() { return grads_; }
  V1<T> grads_view() const { return grads_; }
  // The AdamW moments: of every flat element, or with ZeRO-1 of this rank's block (of each
  // region). A span: flat elements [begin, end) have their moments at [at, at + end - begin).
  struct MomentSpan {
    int64_t begin = 0, end = 0, at = 0;
  };
  Tensor1<T>& adam_m() { return m_; }
  Tensor1<T>& adam_v() { return v_; }
  const std::vector<MomentSpan>& moment_spans() const { return spans_; }
  // The parts of tensor p whose moments this rank keeps, in flat order (none: empty); a
  // tensor lies in one span, or under ZeRO-2/3's finer units (the tied wte's vocabulary
  // chunks) in one per unit, whose moments follow each other (each part's `at` where the
  // one before ends).
  std::vector<MomentSpan> moment_parts(const ParamInfo& p) const {
    std::vector<MomentSpan> out;
    for (const auto& s : spans_) {
      const int64_t begin = std::max(p.offset, s.begin), end = std::min(p.offset + p.numel, s.end);
      if (begin < end) out.push_back({begin, end, s.at + begin - s.begin});
    }
    return out;
  }
  // The summed gradients of the flat elements a moment span (or a part of one) covers:
  // [part.begin, part.end) of the flat gradients, or under ZeRO-2 the owned ones at part.at.
  V1<T> moment_grads(const MomentSpan& part) const {
    return slots_ ? V1<T>(owned_grads_.data() + part.at, part.end - part.begin)
                  : V1<T>(grads_.data() + part.begin, part.end - part.begin);
  }
  // The parameters of a moment span (or a part of one), for writing: [part.begin, part.end)
  // of the flat parameters, or under ZeRO-3 the owned ones at part.at.
  V1<T> moment_params(const MomentSpan& part) {
    if (gather_) return V1<T>(owned_params().data() + part.at, part.end - part.begin);
    return V1<T>(params().data() + part.begin, part.end - part.begin);
  }
  // ZeRO-2: this rank's part of unit's summed gradient.
  V1<T> owned_grads(const GradientUnit& unit) const { return V1<T>(owned_grads_.data() + unit.at, unit.part()); }
  bool moments_sharded() const { return moment_shards_ > 1 || expert_shards_ > 1; }
  // ZeRO-1's equal blocks: [begin, end) of the flat buffers split over the replicas (the
  // whole padded buffer, or with two regions the first) or, experts = true, over the
  // expert replicas (with two regions the second; else empty).
  std::pair<int64_t, int64_t> block_region(bool experts) const {
    if (expert_shards_ == 0)
      return experts ? std::pair<int64_t, int64_t>{0, 0} : std::pair<int64_t, int64_t>{0, int64_t(grads_.extent(0))};
    return experts ? std::pair<int64_t, int64_t>{expert_begin_, int64_t(grads_.extent(0))}
                   : std::pair<int64_t, int64_t>{0, expert_begin_};
  }
  // The gradients' bytes: the flat buffer, or under ZeRO-2 the owned part and the slots.
  int64_t grad_bytes() const {
    const int64_t slots = slots_ ? slots_->slot_values() : 0;
    return (int64_t(grads_.extent(0) + owned_grads_.extent(0)) + slots) * int64_t(sizeof(T));
  }
  // what the buffers hold (store_values(numel(), shards) values without ZeRO-2)
  int64_t state_bytes() const {
    const int64_t gathered = gather_ ? gather_->slot_values() : 0;
    return int64_t(params_.extent(0) + owned_params_.extent(0) + gathered + m_.extent(0) + v_.extent(0)) *
               int64_t(sizeof(T)) +
           grad_bytes();
  }
  // The parameters' bytes: the flat buffer, or under ZeRO-3 the owned parts and the slots.
  int64_t param_bytes() const {
    const int64_t gathered = gather_ ? gather_->slot_values() : 0;
    return int64_t(params_.extent(0) + owned_params_.extent(0) + gathered) * int64_t(sizeof(T));
  }
  // Every gradient to zero (ZeRO-2: the owned ones; slots are zeroed when taken).
  void zero_grads() { Kokkos::deep_copy(slots_ ? owned_grads_ : grads_, T(0)); }

  // bf16 products (float stores): keep the parameters rounded to bf16 once per change
  // (kernels::RoundedCopy), where that pays; call after allocate(). Its bytes, 0 without.
  void keep_rounded_copy();
  static bool rounded_copy_pays() { return std::is_same_v<T, float> && kernels::RoundedCopy::pays(); }
  int64_t rounded_copy_bytes() const { return rounded_ ? rounded_->bytes() : 0; }
  // The bf16 products' state of the model that owns this store (kernels::ProductWorkspace:
  // the copy above is one of its live copies), and the precision its layers' products
  // run in, with it.
  kernels::ProductWorkspace& product_workspace() { return product_workspace_; }
  const kernels::ProductWorkspace& product_workspace() const { return product_workspace_; }
  kernels::ProductPrecision product_precision(Precision precision, bool round_once = true) {
    return {precision, round_once, &product_workspace_};
  }

 private:
  V2<T> rows_of(int i, int64_t r0, int64_t r1, bool grad) const {
    const auto& p = infos_[i];
    const int64_t cols = p.numel / p.count[0], offset = p.offset + r0 * cols, n = (r1 - r0) * cols;
    const V1<T> values = grad ? (slots_ ? slots_->values(offset, n) : V1<T>(grads_.data() + offset, n))
                              : (gather_ ? gather_->values(offset, n) : V1<T>(params_.data() + offset, n));
    return as_matrix(values.data(), r1 - r0, cols);
  }
  V2<T> matrix(const Tensor1<T>& buf, int i) const {
    const auto& p = infos_[i];
    return p.numel == 0 ? V2<T>(buf.data(), 0, 0) : as_matrix(buf.data() + p.offset, p.count[0], p.numel / p.count[0]);
  }
  Tensor1<T>& flat_params() {
    if (gather_) throw std::logic_error("ParamStore: ZeRO-3 keeps no flat parameters (owned_params, param)");
    return params_;
  }
  // shard_gradients' and shard_parameters' layout: the units, the parameters relaid (or,
  // whole = false, only this rank's parts of them, in owned_params_), the moments and
  // owned gradients, the slots
  void lay_out_units(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                     int expert_shards, int expert_index, bool whole);
  std::vector<ParamInfo> infos_;
  std::unordered_map<std::string, int> by_name_;
  int64_t total_ = 0, dense_total_ = 0, expert_begin_ = 0;
  int moment_shards_ = 1, expert_shards_ = 0;
  std::vector<MomentSpan> spans_;
  Tensor1<T> params_, grads_, m_, v_;
  Tensor1<T> owned_grads_;                   // ZeRO-2: this rank's part of each unit's summed gradient
  std::unique_ptr<GradientSlots<T>> slots_;  // ZeRO-2: the units' working gradients
  Tensor1<T> owned_params_;                  // ZeRO-3: this rank's part of each unit's parameters
  std::unique_ptr<ParamGather<T>> gather_;   // ZeRO-3: the units' gathered parameters
  uint64_t changes_ = 0;
  std::optional<uint64_t> deferred_seed_;        // defer_values()
  kernels::ProductWorkspace product_workspace_;  // before rounded_, which it lists
  std::unique_ptr<kernels::RoundedCopy> rounded_;
};

}  // namespace strata
