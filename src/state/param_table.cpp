#include "state/param_table.hpp"

#include <stdexcept>

#include "core/rng.hpp"

namespace strata {

namespace {

ParamInfo declared(const std::string& name, std::vector<int64_t> shape, const Shard& shard) {
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
  p.expert = shard.expert;
  p.tied = shard.tied;
  p.numel = 1;
  p.global_numel = 1;
  for (auto d : p.count) p.numel *= d;
  for (auto d : p.shape) p.global_numel *= d;
  return p;
}

}  // namespace

int ParamTable::add(const std::string& name, std::vector<int64_t> shape, Init init, double std, bool decay,
                    Shard shard) {
  if (by_name_.count(name)) throw std::logic_error("duplicate parameter name " + name);
  ParamInfo p = declared(name, std::move(shape), shard);
  if (p.expert) {
    p.offset = total_;
  } else {  // before the experts' parameters, which move up
    p.offset = dense_total_;
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

int ParamTable::index(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) throw std::out_of_range("no parameter named " + name);
  return it->second;
}

int ParamTable::expert_split() const {
  for (const auto& p : infos_)
    if (p.expert && p.count[0] > 0) return int(p.shape[0] / p.count[0]);
  return 1;
}

int ParamTable::tied_index() const {
  for (size_t i = 0; i < infos_.size(); ++i)
    if (infos_[i].tied) return int(i);
  return -1;
}

int64_t ParamTable::global_numel() const {
  int64_t n = 0;
  for (const auto& p : infos_) n += p.global_numel;
  return n;
}

void ParamTable::relay(const std::function<int64_t(const ParamInfo&)>& moved, int64_t total, int64_t expert_begin) {
  for (auto& p : infos_) p.offset = moved(p);
  total_ = total;
  expert_begin_ = expert_begin;
}

template <class T>
void draw_initial(const ParamInfo& p, V1<T> dst, int64_t from, uint64_t seed) {
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

template void draw_initial<float>(const ParamInfo&, V1<float>, int64_t, uint64_t);
template void draw_initial<double>(const ParamInfo&, V1<double>, int64_t, uint64_t);

}  // namespace strata
