#include "model/param_store.hpp"

#include "core/error.hpp"
#include "core/rng.hpp"

namespace strata {

template <class T>
int ParamStore<T>::add(const std::string& name, std::vector<int64_t> shape, Init init, double std, bool decay) {
  if (by_name_.count(name)) throw std::logic_error("duplicate parameter name " + name);
  if (params_.extent(0) > 0) throw std::logic_error("ParamStore::add after allocate: " + name);
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.numel = 1;
  for (auto d : p.shape) p.numel *= d;
  p.offset = total_;
  p.init = init;
  p.std = std;
  p.decay = decay;
  total_ += p.numel;
  by_name_[name] = int(infos_.size());
  infos_.push_back(p);
  return int(infos_.size()) - 1;
}

template <class T>
void ParamStore<T>::allocate(uint64_t seed) {
  params_ = Tensor1<T>("params", total_);
  grads_ = Tensor1<T>("grads", total_);
  m_ = Tensor1<T>("adam_m", total_);
  v_ = Tensor1<T>("adam_v", total_);
  for (const auto& p : infos_) {
    V1<T> dst(params_.data() + p.offset, p.numel);
    if (p.init == Init::Ones) {
      Kokkos::deep_copy(dst, T(1));
    } else if (p.init == Init::Normal) {
      const uint64_t stream = name_stream(p.name);
      const double sd = p.std;
      // Element i of this shard is global element i (whole tensors today); a sharded
      // layout maps its local index to the global one here.
      Kokkos::parallel_for(
          "param_init", Range(0, p.numel),
          KOKKOS_LAMBDA(const int64_t i) { dst(i) = T(sd * counter_normal(seed, stream, uint64_t(i))); });
    }
  }
  Kokkos::fence();
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
