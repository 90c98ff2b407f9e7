#include "state/param_gather.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace strata {

template <class T>
ParamGather<T>::ParamGather(const std::vector<GradientUnit>& units, T* owned, Comm& data, Comm& expert_data,
                            GatherPolicy policy)
    : units_(units), owned_(owned), data_(data), expert_data_(expert_data), policy_(policy) {
  policy_.prefetch = std::max(0, policy_.prefetch);
}

template <class T>
V1<T> ParamGather<T>::values(int64_t offset, int64_t n) const {
  if (n == 0) return V1<T>(static_cast<T*>(nullptr), 0);
  const auto it = std::upper_bound(units_.begin(), units_.end(), offset,
                                   [](int64_t o, const GradientUnit& u) { return o < u.end; });
  if (it == units_.end() || offset < it->begin || offset + n > it->end)
    throw std::logic_error("ParamGather: flat elements from " + std::to_string(offset) + " lie in no one unit");
  const int u = int(it - units_.begin());
  if (it->shards == 1) return V1<T>(owned_ + it->at + (offset - it->begin), n);
  const auto h = held_.find(u);
  if (h == held_.end() || h->second.request.pending())
    throw std::logic_error("ParamGather: unit " + std::to_string(u) + " (flat elements from " +
                           std::to_string(it->begin) + ") is read but no step gathered it");
  return V1<T>(h->second.slot.data() + (offset - it->begin), n);
}

template <class T>
void ParamGather<T>::post(int u) {
  const auto& unit = units_[size_t(u)];
  if (unit.shards == 1 || held_.count(u)) return;
  const int64_t n = unit.end - unit.begin;
  Held h;
  h.slot = Tensor1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "param_slot"), size_t(n));
  values_ += n;
  most_values_ = std::max(most_values_, values_);
  most_slots_ = std::max(most_slots_, int(held_.size()) + 1);
  const int64_t part = unit.part();
  const auto mine = std::make_pair(unit.index * part, (unit.index + 1) * part);
  Kokkos::deep_copy(Kokkos::subview(h.slot, mine), V1<const T>(owned_ + unit.at, part));
  h.group = unit.experts ? &expert_data_ : &data_;
  h.request = h.group->start_allgather_blocks(V1<T>(h.slot));
  held_.emplace(u, std::move(h));
}

template <class T>
void ParamGather<T>::wait(int u) {
  const auto it = held_.find(u);
  if (it == held_.end() || !it->second.request.pending()) return;
  it->second.group->wait(it->second.request, "allgather");
}

template <class T>
void ParamGather<T>::give_back(int u) {
  wait(u);  // a gather in flight completes on every rank of its group alike
  const auto it = held_.find(u);
  values_ -= int64_t(it->second.slot.extent(0));
  held_.erase(it);  // its slot freed
}

template <class T>
void ParamGather<T>::step(const std::vector<int>& now, const std::vector<std::vector<int>>& ahead) {
  std::set<int> keep(now.begin(), now.end());
  const size_t depth = std::min(ahead.size(), size_t(policy_.prefetch));
  for (size_t k = 0; k < depth; ++k) keep.insert(ahead[k].begin(), ahead[k].end());
  std::vector<int> drop;
  for (const auto& [u, h] : held_)
    if (!policy_.keep && !keep.count(u)) drop.push_back(u);
  for (int u : drop) give_back(u);  // first: their slots are freed before the posts below take others
  for (int u : now) post(u);
  for (size_t k = 0; k < depth; ++k)
    for (int u : ahead[k]) post(u);
  for (int u : now) wait(u);
}

template <class T>
void ParamGather<T>::release_all() {
  std::vector<int> all;
  for (const auto& [u, h] : held_) all.push_back(u);
  for (int u : all) give_back(u);
}

template class ParamGather<float>;
template class ParamGather<double>;

}  // namespace strata
