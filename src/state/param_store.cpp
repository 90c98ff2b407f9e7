#include "state/param_store.hpp"

namespace strata {

template <class T>
int ParamStore<T>::add(const std::string& name, std::vector<int64_t> shape, Init init, double std, bool decay,
                       Shard shard) {
  if (params_.extent(0) > 0) throw std::logic_error("ParamStore::add after allocate: " + name);
  return table_.add(name, std::move(shape), init, std, decay, std::move(shard));
}

template <class T>
void ParamStore<T>::allocate(uint64_t seed, bool state, bool draw) {
  params_ = Tensor1<T>("params", table_.numel());
  if (state) {
    grads_ = Tensor1<T>("grads", table_.numel());
    zero_.keep_all_moments(table_.numel());
  }
  if (draw)
    for (const auto& p : infos()) draw_initial(p, V1<T>(params_.data() + p.offset, p.numel), 0, seed);
  Kokkos::fence();
  ++changes_;
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
void ParamStore<T>::relaid() {
  ++changes_;
  if (rounded_) keep_rounded_copy();  // of the padded buffer
}

template <class T>
void ParamStore<T>::shard_moments(int shards, int index, int expert_shards, int expert_index) {
  zero_.shard_moments(table_, params_, grads_, shards, index, expert_shards, expert_index);
  relaid();
}

template <class T>
void ParamStore<T>::shard_gradients(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards, int index,
                                    int expert_shards, int expert_index) {
  zero_.lay_out_units(table_, params_, grads_, ready_ranges, shards, index, expert_shards, expert_index, {});
  relaid();
}

template <class T>
void ParamStore<T>::shard_parameters(const std::vector<std::pair<int64_t, int64_t>>& ready_ranges, int shards,
                                     int index, int expert_shards, int expert_index, Comm& data, Comm& expert_data,
                                     GatherPolicy policy) {
  if (!deferred_seed_) throw std::logic_error("ParamStore::shard_parameters without defer_values");
  zero_.lay_out_units(table_, params_, grads_, ready_ranges, shards, index, expert_shards, expert_index,
                      deferred_seed_);
  ++changes_;
  rounded_.reset();  // products round the gathered parameters per call
  zero_.gather_parameters(data, expert_data, policy);
}

template <class T>
V2<T> ParamStore<T>::rows_of(int i, int64_t r0, int64_t r1, bool grad) const {
  const auto& p = infos()[size_t(i)];
  if (p.numel == 0) return V2<T>((grad ? grads_ : params_).data(), 0, 0);
  const int64_t cols = p.numel / p.count[0], offset = p.offset + r0 * cols, n = (r1 - r0) * cols;
  return as_matrix((grad ? grad_values(offset, n) : param_values(offset, n)).data(), r1 - r0, cols);
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace strata
