#pragma once
// The per-(batch row, head) matrices attention multiplies, addressed where they lie in the
// activations: Q, K and V are column blocks of the packed qkv activation (B*T, 3C), the
// output a column block of (B*T, C), so no head is copied out or back.
#include <cstdint>

namespace strata::kernels {

// Matrix (bb, hh) starts at data + bb * batch_stride + hh * head_stride; its rows are ld
// apart. at(bb, row, col) is an element of head 0; a batched product steps head_stride.
template <class T>
struct HeadMatrices {
  T* data;
  int64_t ld, batch_stride, head_stride;
  T* at(int64_t bb, int64_t row, int64_t col = 0) const { return data + bb * batch_stride + row * ld + col; }
};
template <class T>
HeadMatrices<const T> as_const(const HeadMatrices<T>& m) {
  return {m.data, m.ld, m.batch_stride, m.head_stride};
}
// Head hh's columns [offset + hh*hs, offset + (hh+1)*hs) of a (B*T, width) activation.
template <class T>
HeadMatrices<T> head_columns(T* activation, int64_t t, int64_t width, int64_t offset, int64_t hs) {
  return {activation + offset, width, t * width, hs};
}

}  // namespace strata::kernels
