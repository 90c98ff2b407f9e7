#include "state/gradient_slots.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace strata {

std::vector<GradientUnit> gradient_units(std::vector<std::pair<int64_t, int64_t>> ready_ranges, int64_t expert_begin,
                                         int64_t total, int shards, int index, int expert_shards, int expert_index) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& r : ready_ranges)
    if (r.second > r.first) ranges.push_back(r);
  std::sort(ranges.begin(), ranges.end());
  ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());  // a range named twice (the tied wte's)
  std::vector<std::pair<int64_t, int64_t>> tiles;
  std::vector<bool> named;
  int64_t covered = 0;
  const auto tile = [&](int64_t begin, int64_t end, bool ready) {
    tiles.emplace_back(begin, end);
    named.push_back(ready);
  };
  for (const auto& r : ranges) {
    if (r.first < covered || r.second > expert_begin)
      throw std::logic_error("gradient_units: ready ranges overlap or reach the experts");
    if (r.first > covered) tile(covered, r.first, false);
    tile(r.first, r.second, true);
    covered = r.second;
  }
  if (covered < expert_begin) tile(covered, expert_begin, false);
  if (total > expert_begin) tile(expert_begin, total, false);
  const bool two = expert_shards > 0 && total > expert_begin;
  std::vector<GradientUnit> units;
  int64_t length = 0, owned = 0;
  for (size_t k = 0; k < tiles.size(); ++k) {
    const auto [begin, end] = tiles[k];
    GradientUnit u;
    u.named = named[k];
    u.from = begin;
    u.experts = two && begin >= expert_begin;
    u.shards = u.experts ? expert_shards : shards;
    u.index = u.experts ? expert_index : index;
    u.begin = length;
    u.used_end = length + (end - begin);
    u.end = length + (end - begin + u.shards - 1) / u.shards * u.shards;
    u.at = owned;
    owned += u.part();
    length = u.end;
    units.push_back(u);
  }
  return units;
}

template <class T>
GradientSlots<T>::GradientSlots(std::vector<GradientUnit> units, T* owned)
    : units_(std::move(units)), owned_(owned), slot_of_(units_.size(), -1) {
  for (size_t u = 1; u < units_.size(); ++u)
    if (units_[u].begin != units_[u - 1].end) throw std::logic_error("GradientSlots: the units do not tile the buffer");
}

template <class T>
int GradientSlots<T>::unit_at(int64_t offset) const {
  const auto it = std::upper_bound(units_.begin(), units_.end(), offset,
                                   [](int64_t o, const GradientUnit& u) { return o < u.end; });
  if (it == units_.end() || offset < it->begin)
    throw std::logic_error("GradientSlots: flat element " + std::to_string(offset) + " lies in no unit");
  return int(it - units_.begin());
}

template <class T>
V1<T> GradientSlots<T>::slot(int u) {
  const auto& unit = units_[size_t(u)];
  const int64_t n = unit.end - unit.begin;
  int& s = slot_of_[size_t(u)];
  if (s < 0) {
    s = int(std::find_if(slots_.begin(), slots_.end(), [](const Tensor1<T>& t) { return t.extent(0) == 0; }) -
            slots_.begin());
    if (s == int(slots_.size())) slots_.emplace_back();
    slots_[size_t(s)] = Tensor1<T>("grad_slot", size_t(n));  // zeroed
    values_ += n;
    most_values_ = std::max(most_values_, values_);
    most_slots_ = std::max(most_slots_, ++held_);
  }
  return V1<T>(slots_[size_t(s)].data(), n);
}

template <class T>
V1<T> GradientSlots<T>::values(int64_t offset, int64_t n) {
  if (n == 0) return V1<T>(static_cast<T*>(nullptr), 0);
  const int u = unit_at(offset);
  const auto& unit = units_[size_t(u)];
  if (offset + n > unit.end) throw std::logic_error("GradientSlots: a tensor spans two units");
  T* base = unit.shards == 1 ? owned_ + unit.at : slot(u).data();
  return V1<T>(base + (offset - unit.begin), n);
}

template <class T>
int GradientSlots<T>::detach(int u) {
  const int s = slot_of_[size_t(u)];
  slot_of_[size_t(u)] = -1;
  return s;
}

template <class T>
void GradientSlots<T>::free_slot(int slot) {
  values_ -= int64_t(slots_[size_t(slot)].extent(0));
  --held_;
  slots_[size_t(slot)] = Tensor1<T>();
}

template class GradientSlots<float>;
template class GradientSlots<double>;

}  // namespace strata
