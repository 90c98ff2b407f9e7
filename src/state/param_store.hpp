#pragma once
// Parameter store: this rank's parameter shards in one flat buffer, their gradients in a
// flat buffer of the same layout, and a named view per tensor (as llm.c does). What the
// parameters are is its ParamTable (state/param_table.hpp); what ZeRO shards (the AdamW
// moments, ZeRO-2's gradient units, ZeRO-3's parameter parts and gathers) is its ZeroState
// (state/zero_state.hpp), through which it reads a view while ZeRO-2/3 hold the values.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/products.hpp"
#include "state/param_table.hpp"
#include "state/zero_state.hpp"

namespace strata {

template <class T>
class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;  // its rounded copy points at its change count
  ParamStore& operator=(const ParamStore&) = delete;
  // Declares a tensor (ParamTable::add); all declarations come before allocate().
  int add(const std::string& name, std::vector<int64_t> shape, Init init, double std = 0, bool decay = false,
          Shard shard = {});
  void draw_rows_below(int i, int64_t rows) { table_.draw_rows_below(i, rows); }  // before allocate()
  // Allocates the flat buffers and fills parameters from the counter-based RNG; with
  // state = false the parameters only (the ZeRO stages' sharding allocates the rest, so a
  // rank never holds the unsharded gradients and moments); with draw = false the parameters
  // are left zero for a caller that writes every value (model.init_from).
  void allocate(uint64_t seed, bool state = true, bool draw = true);
  // In place of allocate() where shard_parameters follows (ZeRO-3): nothing is allocated,
  // and shard_parameters draws this rank's parts of the initial values straight into its
  // owned parameters, so no rank ever holds the whole parameters either.
  void defer_values(uint64_t seed) { deferred_seed_ = seed; }
  // ZeRO stage 1, after allocate() (ZeroState::shard_moments).
  void shard_moments(int shards, int index, int expert_shards = 0, int expert_index = 0);
  // ZeRO stage 2, after allocate() (ZeroState::lay_out_units): grad(i) is then a working
  // slot of its unit's gradient, until the engine reduce-scatters the unit into this
  // rank's part (state/gradient_slots.hpp).
  void shard_gradients(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                       int expert_shards = 0, int expert_index = 0);
  // ZeRO stage 3, after defer_values() (in place of shard_gradients, with its arguments):
  // this rank keeps its part of every unit's parameters too and no flat parameters; a
  // unit's whole parameters exist while a pass's step uses them (ZeroState::use_params).
  void shard_parameters(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                        int expert_shards, int expert_index, Comm& data, Comm& expert_data, GatherPolicy policy);
  ZeroState<T>& zero() { return zero_; }
  const ZeroState<T>& zero() const { return zero_; }

  const ParamTable& table() const { return table_; }
  int index(const std::string& name) const { return table_.index(name); }
  const std::vector<ParamInfo>& infos() const { return table_.infos(); }
  int64_t numel() const { return table_.numel(); }
  int64_t expert_begin() const { return table_.expert_begin(); }

  // (ZeRO-3: in its unit's gathered slot, which a step of the pass took: use_params)
  V1<T> param(int i) const { return param_values(infos()[size_t(i)].offset, infos()[size_t(i)].numel); }
  // (ZeRO-2: its unit's working slot, taken at the first call of a backward)
  V1<T> grad(int i) const { return grad_values(infos()[size_t(i)].offset, infos()[size_t(i)].numel); }
  // 2D views of the local part: (count[0], product of the other counts).
  V2<T> param2(int i) const { return param_rows(i, 0, infos()[size_t(i)].count[0]); }
  V2<T> grad2(int i) const { return grad_rows(i, 0, infos()[size_t(i)].count[0]); }
  // Rows [r0, r1) of parameter i's 2D view (ZeRO-3: they lie in one unit, e.g. a chunk of
  // the vocabulary, which may be all a step gathered of the parameter).
  V2<T> param_rows(int i, int64_t r0, int64_t r1) const { return rows_of(i, r0, r1, false); }
  V2<T> grad_rows(int i, int64_t r0, int64_t r1) const { return rows_of(i, r0, r1, true); }
  bool held(int i) const { return infos()[size_t(i)].numel > 0; }

  // The parameters for writing: every call counts as a change, so that what is made from
  // them (the bf16 copy) is made again before it is next read.
  // (ZeRO-3 keeps none: ZeroState::owned_params)
  Tensor1<T>& params() {
    ++changes_;
    return flat_params();
  }
  const Tensor1<T>& params() const { return const_cast<ParamStore*>(this)->flat_params(); }
  // The parameters this rank keeps: the flat buffer, or under ZeRO-3 its owned parts.
  V1<const T> param_values() const {
    return zero_.params_sharded() ? V1<const T>(zero_.owned_params()) : V1<const T>(params_);
  }
  // The flat gradients (empty under ZeRO-2, which keeps its part: moment_grads).
  Tensor1<T>& grads() { return grads_; }
  V1<T> grads_view() const { return grads_; }
  // The summed gradients of the flat elements a moment span (or a part of one) covers:
  // [part.begin, part.end) of the flat gradients, or under ZeRO-2 the owned ones at part.at.
  V1<T> moment_grads(const MomentSpan& part) const {
    return zero_.gradients_sharded() ? V1<T>(zero_.owned_grads().data() + part.at, part.end - part.begin)
                                     : V1<T>(grads_.data() + part.begin, part.end - part.begin);
  }
  // The parameters of a moment span (or a part of one), for writing: [part.begin, part.end)
  // of the flat parameters, or under ZeRO-3 the owned ones at part.at.
  V1<T> moment_params(const MomentSpan& part) {
    if (zero_.params_sharded()) return V1<T>(zero_.owned_params().data() + part.at, part.end - part.begin);
    return V1<T>(params().data() + part.begin, part.end - part.begin);
  }
  // The gradients' bytes: the flat buffer, or under ZeRO-2 the owned part and the slots.
  int64_t grad_bytes() const {
    return (int64_t(grads_.extent(0) + zero_.owned_grads().extent(0)) + zero_.slot_values()) * int64_t(sizeof(T));
  }
  // The parameters' bytes: the flat buffer, or under ZeRO-3 the owned parts and the slots.
  int64_t param_bytes() const {
    return int64_t(params_.extent(0) + zero_.owned_params().extent(0) + zero_.gathered_values()) * int64_t(sizeof(T));
  }
  // what the buffers hold (store_values(numel(), shards) values without ZeRO-2)
  int64_t state_bytes() const { return param_bytes() + zero_.moment_values() * int64_t(sizeof(T)) + grad_bytes(); }
  // Every gradient to zero (ZeRO-2: the owned ones; slots are zeroed when taken).
  void zero_grads() { Kokkos::deep_copy(zero_.gradients_sharded() ? V1<T>(zero_.owned_grads()) : V1<T>(grads_), T(0)); }

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
  V1<T> param_values(int64_t offset, int64_t n) const {
    return zero_.params_sharded() ? zero_.param_gather()->values(offset, n) : V1<T>(params_.data() + offset, n);
  }
  V1<T> grad_values(int64_t offset, int64_t n) const {
    return zero_.gradients_sharded() ? zero_.gradient_slots()->values(offset, n) : V1<T>(grads_.data() + offset, n);
  }
  V2<T> rows_of(int i, int64_t r0, int64_t r1, bool grad) const;
  Tensor1<T>& flat_params() {
    if (zero_.params_sharded()) throw std::logic_error("ParamStore: ZeRO-3 keeps no flat parameters (owned_params)");
    return params_;
  }
  void relaid();  // after ZeroState laid the buffers out anew
  ParamTable table_;
  Tensor1<T> params_, grads_;
  ZeroState<T> zero_;
  uint64_t changes_ = 0;
  std::optional<uint64_t> deferred_seed_;        // defer_values()
  kernels::ProductWorkspace product_workspace_;  // before rounded_, which it lists
  std::unique_ptr<kernels::RoundedCopy> rounded_;
};

}  // namespace strata
