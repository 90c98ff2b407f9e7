#pragma once
// What the layer-parallel solver knows of a problem, in the spirit of XBraid's "app":
// how to take one step of any level, and how to handle a state (clone, sum, norm,
// pack/unpack for messages). The solver never sees the network; an adapter turns a
// model's layers into steps (ode_steps.hpp), forward or adjoint.
#include "core/tensor.hpp"
#include "kernels/sum_squares.hpp"

namespace strata {

template <class T>
class TimeStepper {
 public:
  virtual ~TimeStepper() = default;
  // Values per state (contiguous).
  virtual int64_t state_size() const = 0;
  // out = Phi(in): the step of level `level` from its point i to point i + 1, standing for
  // cfactor^level fine steps from fine point i * cfactor^level. out never aliases in.
  virtual void step(int level, int64_t i, V1<const T> in, V1<T> out) = 0;

  // Vector operations on states; the defaults treat a state as a plain array.
  // y = alpha x + beta y
  virtual void sum(T alpha, V1<const T> x, T beta, V1<T> y) const {
    Kokkos::parallel_for(
        "mgrit_sum", Range(0, y.extent(0)), KOKKOS_LAMBDA(const int64_t k) { y(k) = alpha * x(k) + beta * y(k); });
  }
  // The squared norm of x (the solver sums it over ranks).
  virtual double norm_squared(V1<const T> x) const { return kernels::sum_of_squares<T>(x); }
  // A new state holding x's values.
  virtual Tensor1<T> clone(V1<const T> x) const {
    Tensor1<T> c(Kokkos::view_alloc(Kokkos::WithoutInitializing, "mgrit.state"), x.extent(0));
    Kokkos::deep_copy(c, x);
    return c;
  }
  // To and from a host buffer of state_size() values, for MPI.
  virtual void pack(V1<const T> x, T* host) const {
    Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(host, x.extent(0));
    Kokkos::deep_copy(h, x);
  }
  virtual void unpack(const T* host, V1<T> x) const {
    Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(host, x.extent(0));
    Kokkos::deep_copy(x, h);
  }
};

}  // namespace strata
