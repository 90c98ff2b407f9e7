#pragma once
// An activation that only feeds products (a block's layer-norm outputs and GELU output),
// kept as T, or as bf16 where bf16 products round their operands in a pass of their own:
// then the kernel that makes it writes it rounded (kernels/bf16.hpp), with the rounding
// the products would apply, so they multiply the same bits without rounding it again, and
// it takes 2 bytes a value instead of 4.
#include <type_traits>

#include "core/tensor.hpp"
#include "kernels/bf16.hpp"

namespace strata::kernels {

template <class T>
struct ProductOperand {
  Tensor2<T> values;      // (rows, cols), or empty when kept as bf16
  Tensor2<bf16> rounded;  // (rows, cols) as bf16, or empty

  // The one buffer it keeps (core/tensor.hpp: AllocateEach, CountBytes).
  template <class Each>
  void buffers(const char* label, int64_t rows, int64_t cols, bool as_bf16, Each&& each) {
    each(values, label, as_bf16 ? 0 : rows, cols);
    each(rounded, label, as_bf16 ? rows : 0, cols);
  }
  int64_t rows() const { return int64_t(values.extent(0) + rounded.extent(0)); }
  int64_t bytes() const { return view_bytes(values, rounded); }
  // f(view) with the buffer it keeps: V2<T> or V2<bf16> to write, V2<const T> or
  // V2<const bf16> to read. Never bf16 for T other than float.
  template <class F>
  void write(F&& f) {
    if constexpr (std::is_same_v<T, float>)
      if (rounded.extent(0) > 0) return f(V2<bf16>(rounded));
    f(V2<T>(values));
  }
  template <class F>
  void read(F&& f) const {
    if constexpr (std::is_same_v<T, float>)
      if (rounded.extent(0) > 0) return f(V2<const bf16>(rounded));
    f(V2<const T>(values));
  }
};

}  // namespace strata::kernels
