#include "model/param_store.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace strata {

template <class T>
int ParamStore<T>::add(const std::string& name, std::vector<int64_t> shape, Init init, double std, bool decay,
                       Shard shard) {
  if (by_name_.count(name)) throw std::logic_error("duplicate parameter name " + name);
  if (params_.extent(0) > 0) throw std::logic_error("ParamStore::add after allocate: " + name);
  if (shape.empty() || shape.size() > 3) throw std::logic_error("parameters have 1 to 3 dimensions: " + name);
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.start = shard.start.empty() ? std::vector<int64_t>(p.shape.size(), 0) : shard.start;
  p.count = shard.count.empty() ? p.shape : shard.count;
  if (p.start.size() != p.shape.size() || p.count.size() != p.shape.size())
    throw std::logic_error("shard of " + name + " has the wrong number of dimensions");
  bool held = false;  // all counts 0: declared here, held by another pipeline stage
  for (size_t d = 0; d < p.shape.size(); ++d) held = held || p.count[d] > 0;
  for (size_t d = 0; d < p.shape.size() && held; ++d)
    if (p.start[d] < 0 || p.count[d] <= 0 || p.start[d] + p.count[d] > p.shape[d])
      throw std::logic_error("shard of " + name + " lies outside the tensor");
  p.replica = shard.replica;
  p.replicas = shard.replicas;
  p.numel = 1;
  p.global_numel = 1;
  for (auto d : p.count) p.numel *= d;
  for (auto d : p.shape) p.global_numel *= d;
  p.expert = shard.expert;
  if (p.expert) {
    p.offset = total_;
  } else {  // before the experts' parameters, which move up
    p.offset = dense_total_;
    if (total_ > dense_total_)  // experts' parameters are held: they move up
      for (auto& q : infos_)
        if (q.expert) q.offset += p.numel;
    dense_total_ += p.numel;
    expert_begin_ = dense_total_;
  }
  p.init = init;
  p.std = std;
  p.decay = decay;
  total_ += p.numel;
  by_name_[name] = int(infos_.size());
  infos_.push_back(p);
  return int(infos_.size()) - 1;
}

template <class T>
void ParamStore<T>::allocate(uint64_t seed, bool state, bool draw_values) {
  params_ = Tensor1<T>("params", total_);
  if (state) {
    grads_ = Tensor1<T>("grads", total_);
    m_ = Tensor1<T>("adam_m", total_);
    v_ = Tensor1<T>("adam_v", total_);
  }
  spans_ = {{0, total_, 0}};
  if (draw_values)
    for (const auto& p : infos_) draw(p, V1<T>(params_.data() + p.offset, p.numel), 0, seed);
  Kokkos::fence();
  ++changes_;
}

template <class T>
void ParamStore<T>::draw(const ParamInfo& p, V1<T> dst, int64_t from, uint64_t seed) {
  if (p.init == Init::Ones) {
    Kokkos::deep_copy(dst, T(1));
  } else if (p.init == Init::Normal) {
    const uint64_t stream = name_stream(p.name);
    const double sd = p.std;
    // Local element i -> its global index, so every layout draws the same global values.
    const ShardIndex index(p);
    const int64_t drawn = p.drawn_rows < 0 ? p.global_numel : p.drawn_rows * (p.global_numel / p.shape[0]);
    Kokkos::parallel_for(
        "param_init", Range(0, int64_t(dst.extent(0))), KOKKOS_LAMBDA(const int64_t i) {
          const int64_t g = index.global(from + i);
          dst(i) = g < drawn ? T(sd * counter_normal(seed, stream, uint64_t(g))) : T(0);
        });
  }  // (Init::Zeros: the buffers start at zero)
}

template <class T>
void ParamStore<T>::keep_rounded_copy() {
  if constexpr (std::is_same_v<T, float>) {
    rounded_.reset();
    if (rounded_copy_pays())
      rounded_ = std::make_unique<kernels::RoundedCopy>(product_workspace_, params_.data(), int64_t(params_.extent(0)),
                                                        &changes_);
  }
}

template <class T>
void ParamStore<T>::shard_moments(int shards, int index, int expert_shards, int expert_index) {
  const int64_t dense = expert_begin_, experts = total_ - expert_begin_;
  // one region (every parameter over `shards`), or two (the experts' over their own group)
  const bool two = expert_shards > 0 && experts > 0;
  const int64_t block = zero_block(two ? dense : total_, shards);
  const int64_t expert_block = two ? zero_block(experts, expert_shards) : 0;
  const int64_t length = two ? block * shards + expert_block * expert_shards : block * shards;
  const int64_t shift = two ? block * shards - dense : 0;  // where the experts move
  m_ = v_ = grads_ = Tensor1<T>();                         // freed first: never more than the unsharded store at once
  Tensor1<T> params("params", length);                     // zero padding
  const auto copy = [&](int64_t from, int64_t n, int64_t to) {
    Kokkos::deep_copy(Kokkos::subview(params, std::make_pair(to, to + n)),
                      Kokkos::subview(params_, std::make_pair(from, from + n)));
  };
  if (two) {
    copy(0, dense, 0);
    copy(dense, experts, dense + shift);
    for (auto& p : infos_)
      if (p.expert) p.offset += shift;
    expert_begin_ += shift;
    total_ += shift;
  } else {
    copy(0, total_, 0);
  }
  params_ = params;
  ++changes_;
  if (rounded_) keep_rounded_copy();  // of the padded buffer
  grads_ = Tensor1<T>("grads", length);
  m_ = Tensor1<T>("adam_m", block + expert_block);
  v_ = Tensor1<T>("adam_v", block + expert_block);
  moment_shards_ = shards;
  expert_shards_ = two ? expert_shards : 0;
  const auto span = [](int64_t begin, int64_t n, int64_t limit, int64_t at) {
    return MomentSpan{begin, std::clamp(limit, begin, begin + n), at};
  };
  spans_ = {span(block * index, block, two ? dense : total_, 0)};
  if (two) spans_.push_back(span(expert_begin_ + expert_block * expert_index, expert_block, total_, block));
}

template <class T>
void ParamStore<T>::shard_gradients(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                                    int expert_shards, int expert_index) {
  lay_out_units(ready_ranges, shards, index, expert_shards, expert_index, true);
}

template <class T>
void ParamStore<T>::shard_parameters(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards,
                                     int index, int expert_shards, int expert_index, Comm& data, Comm& expert_data,
                                     GatherPolicy policy) {
  lay_out_units(ready_ranges, shards, index, expert_shards, expert_index, false);
  rounded_.reset();  // products round the gathered parameters per call
  gather_ = std::make_unique<ParamGather<T>>(slots_->units(), owned_params_.data(), data, expert_data, policy);
}

template <class T>
void ParamStore<T>::lay_out_units(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                                  int expert_shards, int expert_index, bool whole) {
  std::vector<GradientUnit> units =
      gradient_units(ready_ranges, expert_begin_, total_, shards, index, expert_shards, expert_index);
  const int64_t length = units.empty() ? 0 : units.back().end;
  for (const auto& u : units)  // a unit's padding between two parts of one tensor would cut it in two
    for (const auto& p : infos_)
      if (u.end > u.used_end && p.offset < u.from + (u.used_end - u.begin) &&
          u.from + (u.used_end - u.begin) < p.offset + p.numel)
        throw std::logic_error("ParamStore: a unit ends inside " + p.name + " with padding after it");
  int64_t owned = 0;
  for (const auto& u : units) owned += u.part();
  m_ = v_ = grads_ = Tensor1<T>();  // freed first: never more than the unsharded store at once
  Tensor1<T> params;
  if (whole) {  // each unit's parameters where they lay, the padding past them left zero
    params = Tensor1<T>("params", length);
    for (const auto& u : units)
      Kokkos::deep_copy(Kokkos::subview(params, std::make_pair(u.begin, u.used_end)),
                        Kokkos::subview(params_, std::make_pair(u.from, u.from + (u.used_end - u.begin))));
  } else {  // ZeRO-3: only this rank's part of each, drawn from the RNG (defer_values)
    if (!deferred_seed_) throw std::logic_error("ParamStore::shard_parameters without defer_values");
    owned_params_ = Tensor1<T>("owned_params", owned);
    for (const auto& u : units) {
      const int64_t begin = u.index * u.part(), end = (u.index + 1) * u.part();
      // the part's values [lo, hi) in the unsharded layout, parameter by parameter
      const int64_t lo = u.from + begin, hi = u.from + std::clamp(u.used_end - u.begin, begin, end);
      for (const auto& p : infos_) {
        const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel);
        if (a < b) draw(p, V1<T>(owned_params_.data() + u.at + (a - lo), b - a), a - p.offset, *deferred_seed_);
      }
    }
    Kokkos::fence();
  }
  // a flat offset in the new layout (the old end: the new end)
  const auto moved = [&](int64_t o) {
    for (const auto& u : units)
      if (o < u.from + (u.used_end - u.begin)) return u.begin + (o - u.from);
    return length;
  };
  for (auto& p : infos_) p.offset = moved(p.offset);
  const bool experts = total_ > expert_begin_;
  expert_begin_ = experts ? units.back().begin : length;
  total_ = length;
  params_ = params;
  ++changes_;
  if (rounded_ && whole) keep_rounded_copy();  // of the padded buffer
  m_ = Tensor1<T>("adam_m", owned);
  v_ = Tensor1<T>("adam_v", owned);
  owned_grads_ = Tensor1<T>("owned_grads", owned);
  spans_.clear();
  for (const auto& u : units) {
    const int64_t begin = u.begin + u.index * u.part();
    spans_.push_back({begin, std::clamp(u.used_end, begin, begin + u.part()), u.at});
  }
  moment_shards_ = shards;
  expert_shards_ = experts && expert_shards > 0 ? expert_shards : 0;
  slots_ = std::make_unique<GradientSlots<T>>(std::move(units), owned_grads_.data());
}

template <class T>
void ParamStore<T>::use_params(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& steps, size_t k) {
  if (!gather_) return;
  const auto units_of = [&](const std::vector<std::pair<int64_t, int64_t>>& ranges) {
    std::vector<int> out;
    const auto& units = slots_->units();
    for (const auto& [begin, end] : ranges)
      if (end > begin)
        for (int u = slots_->unit_at(begin); u < int(units.size()) && units[size_t(u)].begin < end; ++u)
          if (std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
    return out;
  };
  std::vector<std::vector<int>> ahead;
  for (size_t j = k + 1; j < steps.size() && ahead.size() < size_t(gather_->prefetch()); ++j)
    ahead.push_back(units_of(steps[j]));
  gather_->step(units_of(steps[k]), ahead);
}

template <class T>
int64_t ParamStore<T>::global_numel() const {
  int64_t n = 0;
  for (const auto& p : infos_) n += p.global_numel;
  return n;
}

template <class T>
int ParamStore<T>::index(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) throw std::out_of_range("no parameter named " + name);
  return it->second;
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace strata
