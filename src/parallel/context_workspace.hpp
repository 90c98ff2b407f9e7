#pragma once
// The buffers the context split's attention keeps from one call to the next: ring
// attention's five K|V blocks (ring_attention.hpp) and the all-to-all form's exchange
// buffers and gathered heads (all_to_all_attention.hpp). Every layer's call wants the
// same sizes, and buffers allocated afresh were page-faulted in on every call (13% of a
// bf16 step of "small" at T = 8192). One per model, owned by it and shared by its
// blocks; a slot grows to the largest size asked of it and never shrinks. Its bytes are
// the model's workspace (StageModel::workspace_bytes), which the run's memory line and
// the planner count (bytes_for: the same sizes, from the shapes).
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

template <class T>
class ContextWorkspace {
 public:
  // A slot's first n values in device memory, and a host copy for MPI (GPU builds stage
  // through it: MPICH here is not CUDA-aware; on CPUs it is the same memory).
  using HostValues = Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  struct Staged {
    V1<T> device;
    HostValues host;
  };

  V1<T> buffer(int slot, int64_t n) { return staged(slot, n).device; }
  Staged staged(int slot, int64_t n) {
    if (int(device_.size()) <= slot) {
      device_.resize(size_t(slot) + 1);
      host_.resize(size_t(slot) + 1);
    }
    auto& d = device_[size_t(slot)];
    if (int64_t(d.extent(0)) < n) {
      d = Tensor1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("context.workspace")), n);
      host_[size_t(slot)] = Kokkos::create_mirror_view(d);
    }
    return {V1<T>(d.data(), n), HostValues(host_[size_t(slot)].data(), size_t(n))};
  }
  // device bytes allocated so far
  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& d : device_) b += int64_t(d.extent(0)) * int64_t(sizeof(T));
    return b;
  }
  // What a training step allocates, for rows = B*t local rows of a local heads' width a
  // (values of T): the ring's five (rows, 2a) blocks, or the all-to-all form's buffers
  // (send and receive of q|k|v, the gathered q|k|v, output, output gradient and q|k|v
  // gradient: 14 rows x a values).
  static int64_t bytes_for(bool all_to_all, int64_t rows, int64_t a) {
    return (all_to_all ? 14 : 10) * rows * a * int64_t(sizeof(T));
  }

 private:
  std::vector<Tensor1<T>> device_;
  std::vector<typename Tensor1<T>::HostMirror> host_;
};

}  // namespace strata
