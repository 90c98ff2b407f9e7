#include "state/zero_state.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

template <class T>
void ZeroState<T>::keep_all_moments(int64_t total) {
  m_ = Tensor1<T>("adam_m", total);
  v_ = Tensor1<T>("adam_v", total);
  spans_ = {{0, total, 0}};
  dense_region_ = {0, total};
}

template <class T>
void ZeroState<T>::shard_moments(ParamTable& table, Tensor1<T>& params, Tensor1<T>& grads, int shards, int index,
                                 int expert_shards, int expert_index) {
  const int64_t total = table.numel(), dense = table.expert_begin(), experts = total - dense;
  // one region (every parameter over `shards`), or two (the experts' over their own group)
  const bool two = expert_shards > 0 && experts > 0;
  const int64_t block = zero_block(two ? dense : total, shards);
  const int64_t expert_block = two ? zero_block(experts, expert_shards) : 0;
  const int64_t length = two ? block * shards + expert_block * expert_shards : block * shards;
  const int64_t shift = two ? block * shards - dense : 0;  // where the experts move
  m_ = v_ = grads = Tensor1<T>();                          // freed first: never more than the unsharded store at once
  Tensor1<T> padded("params", length);                     // zero padding
  const auto copy = [&](int64_t from, int64_t n, int64_t to) {
    Kokkos::deep_copy(Kokkos::subview(padded, std::make_pair(to, to + n)),
                      Kokkos::subview(params, std::make_pair(from, from + n)));
  };
  copy(0, two ? dense : total, 0);
  if (two) copy(dense, experts, dense + shift);
  table.relay([&](const ParamInfo& p) { return p.expert ? p.offset + shift : p.offset; }, total + shift, dense + shift);
  params = padded;
  grads = Tensor1<T>("grads", length);
  m_ = Tensor1<T>("adam_m", block + expert_block);
  v_ = Tensor1<T>("adam_v", block + expert_block);
  moment_shards_ = shards;
  expert_shards_ = two ? expert_shards : 0;
  const int64_t limit = table.numel(), expert_begin = table.expert_begin();
  dense_region_ = two ? std::pair<int64_t, int64_t>{0, expert_begin} : std::pair<int64_t, int64_t>{0, length};
  expert_region_ = two ? std::pair<int64_t, int64_t>{expert_begin, length} : std::pair<int64_t, int64_t>{0, 0};
  const auto span = [](int64_t begin, int64_t n, int64_t end, int64_t at) {
    return MomentSpan{begin, std::clamp(end, begin, begin + n), at};
  };
  spans_ = {span(block * index, block, two ? expert_begin : limit, 0)};
  if (two) spans_.push_back(span(expert_begin + expert_block * expert_index, expert_block, limit, block));
}

// Throws where a unit's padding would cut one of the table's tensors in two.
static void check_unit_padding(const std::vector<GradientUnit>& units, const ParamTable& table) {
  for (const auto& u : units)
    for (const auto& p : table.infos())
      if (u.end > u.used_end && p.offset < u.from + (u.used_end - u.begin) &&
          u.from + (u.used_end - u.begin) < p.offset + p.numel)
        throw std::logic_error("ZeroState: a unit ends inside " + p.name + " with padding after it");
}

template <class T>
void ZeroState<T>::lay_out_units(ParamTable& table, Tensor1<T>& params, Tensor1<T>& grads,
                                 const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                                 int expert_shards, int expert_index, std::optional<uint64_t> seed) {
  std::vector<GradientUnit> units =
      gradient_units(ready_ranges, table.expert_begin(), table.numel(), shards, index, expert_shards, expert_index);
  check_unit_padding(units, table);
  const int64_t length = units.empty() ? 0 : units.back().end;
  int64_t owned = 0;
  for (const auto& u : units) owned += u.part();
  m_ = v_ = grads = Tensor1<T>();  // freed first: never more than the unsharded store at once
  Tensor1<T> relaid;
  if (!seed) {  // each unit's parameters where they lay, the padding past them left zero
    relaid = Tensor1<T>("params", length);
    for (const auto& u : units)
      Kokkos::deep_copy(Kokkos::subview(relaid, std::make_pair(u.begin, u.used_end)),
                        Kokkos::subview(params, std::make_pair(u.from, u.from + (u.used_end - u.begin))));
  } else {  // ZeRO-3: only this rank's part of each, drawn from the RNG
    owned_params_ = Tensor1<T>("owned_params", owned);
    for (const auto& u : units) {
      const int64_t begin = u.index * u.part(), end = (u.index + 1) * u.part();
      // the part's values [lo, hi) in the unsharded layout, parameter by parameter
      const int64_t lo = u.from + begin, hi = u.from + std::clamp(u.used_end - u.begin, begin, end);
      for (const auto& p : table.infos()) {
        const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel);
        if (a < b) draw_initial(p, V1<T>(owned_params_.data() + u.at + (a - lo), b - a), a - p.offset, *seed);
      }
    }
    Kokkos::fence();
  }
  // a flat offset in the new layout (the old end: the new end)
  const auto moved = [&](const ParamInfo& p) {
    for (const auto& u : units)
      if (p.offset < u.from + (u.used_end - u.begin)) return u.begin + (p.offset - u.from);
    return length;
  };
  const bool experts = table.numel() > table.expert_begin();
  table.relay(moved, length, experts ? units.back().begin : length);
  params = relaid;
  keep_unit_moments(units, owned, shards, experts && expert_shards > 0 ? expert_shards : 0);
  slots_ = std::make_unique<GradientSlots<T>>(std::move(units), owned_grads_.data());
}

template <class T>
void ZeroState<T>::keep_unit_moments(const std::vector<GradientUnit>& units, int64_t owned, int shards,
                                     int expert_shards) {
  m_ = Tensor1<T>("adam_m", owned);
  v_ = Tensor1<T>("adam_v", owned);
  owned_grads_ = Tensor1<T>("owned_grads", owned);
  spans_.clear();
  for (const auto& u : units) {
    const int64_t begin = u.begin + u.index * u.part();
    spans_.push_back({begin, std::clamp(u.used_end, begin, begin + u.part()), u.at});
  }
  moment_shards_ = shards;
  expert_shards_ = expert_shards;
  dense_region_ = expert_region_ = {0, 0};  // (ZeRO-1's blocks: the units' parts take their place)
}

template <class T>
void ZeroState<T>::gather_parameters(Comm& data, Comm& expert_data, GatherPolicy policy) {
  if (!slots_) throw std::logic_error("ZeroState::gather_parameters before lay_out_units");
  gather_ = std::make_unique<ParamGather<T>>(slots_->units(), owned_params_.data(), data, expert_data, policy);
}

template <class T>
void ZeroState<T>::use_params(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& steps, size_t k) {
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
std::vector<MomentSpan> ZeroState<T>::moment_parts(const ParamInfo& p) const {
  std::vector<MomentSpan> out;
  for (const auto& s : spans_) {
    const int64_t begin = std::max(p.offset, s.begin), end = std::min(p.offset + p.numel, s.end);
    if (begin < end) out.push_back({begin, end, s.at + begin - s.begin});
  }
  return out;
}

template class ZeroState<float>;
template class ZeroState<double>;

}  // namespace strata
