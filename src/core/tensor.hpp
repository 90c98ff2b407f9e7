#pragma once
// Tensor aliases used across strata. Every tensor is a Kokkos::View in the default
// execution space's memory, row-major (LayoutRight) whatever the backend's default is,
// so a (rows, cols) buffer means the same on CPU and GPU.
//
// Owners hold managed views (Tensor1/2/3); kernels take unmanaged ones (V1/V2/V3),
// which every managed view converts to implicitly, so parameter shards carved out of a
// flat buffer and freshly allocated activations go through the same kernels.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>

namespace strata {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

template <class T>
using Tensor1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using Tensor2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;
template <class T>
using Tensor3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace>;

template <class T>
using V1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace, Unmanaged>;
template <class T>
using V2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Unmanaged>;
template <class T>
using V3 = Kokkos::View<T***, Kokkos::LayoutRight, MemSpace, Unmanaged>;

using Range = Kokkos::RangePolicy<ExecSpace>;

// A (rows, cols) unmanaged view onto contiguous memory starting at ptr.
template <class T>
V2<T> as_matrix(T* ptr, int64_t rows, int64_t cols) {
  return V2<T>(ptr, rows, cols);
}

// Bytes held by some views (memory accounting: activation caches, buffers).
template <class... Views>
int64_t view_bytes(const Views&... views) {
  return (int64_t(0) + ... + int64_t(views.span() * sizeof(typename Views::value_type)));
}

// v reallocated (uninitialised) under label unless it has exactly the extents n.
template <class View, class... Extents>
void ensure_extents(View& v, const char* label, Extents... n) {
  size_t dim = 0;
  if (!((size_t(v.extent(dim++)) == size_t(n)) && ...))
    v = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), size_t(n)...);
}

// Caches declare their buffers once, in a member
//   template <class Each> void buffers(<shape arguments>, Each&& each)
// that calls each(view, label, extents...) for every buffer (extent 0: not kept). ensure()
// allocates through AllocateEach, bytes_for() counts through CountBytes, so the memory a
// run holds and the figure the planner counts come from the same lines.
struct AllocateEach {
  template <class View, class... Extents>
  void operator()(View& v, const char* label, Extents... n) const {
    v = View(std::string(label), size_t(n)...);
  }
};
struct CountBytes {
  int64_t bytes = 0;
  template <class View, class... Extents>
  void operator()(View&, const char*, Extents... n) {
    bytes += (int64_t(sizeof(typename View::value_type)) * ... * int64_t(n));
  }
};

}  // namespace strata
