#include "parallel/all_to_all_attention.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention.hpp"

namespace strata {
namespace {

// local (B*t rows, parts of A columns each: q | k | v, or one) -> full (B*T rows in
// position order, parts of A/X columns: this rank's heads of each part).
template <class T>
void to_heads(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<const T> local, V2<T> full, int64_t b, int64_t t,
              int parts) {
  const int64_t x = cp.size, w = local.extent(1) / parts, a = w / x, rows = b * t, block = rows * parts * a;
  const bool zigzag = cp.zigzag;
  V1<T> send = ws.buffer(0, x * block), recv = ws.buffer(1, x * block);
  const T* const src = local.data();
  T* const s = send.data();
  Kokkos::parallel_for(
      "a2a.pack_heads", Range(0, x * rows), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t j = i / rows, row = i % rows;  // block j: the heads of rank j
        for (int64_t p = 0; p < parts; ++p)
          for (int64_t c = 0; c < a; ++c)
            s[(j * rows + row) * parts * a + p * a + c] = src[row * parts * w + p * w + j * a + c];
      });
  cp.ring->alltoall<T>(V1<const T>(send.data(), send.size()), recv);
  const T* const r = recv.data();
  T* const dst = full.data();
  const int64_t width = parts * a, big_t = t * x;
  Kokkos::parallel_for(
      "a2a.place_rows", Range(0, x * rows), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t from = i / rows, row = i % rows, bb = row / t, lr = row % t;  // rank `from`'s row
        const int64_t at = bb * big_t + ContextParallel::position_of(from, lr, t, x, zigzag);
        for (int64_t k = 0; k < width; ++k) dst[at * width + k] = r[i * width + k];
      });
}

// The way back: full (B*T rows, parts of A/X) -> local (B*t rows, parts of A).
template <class T>
void to_rows(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<const T> full, V2<T> local, int64_t b, int64_t t,
             int parts) {
  const int64_t x = cp.size, w = local.extent(1) / parts, a = w / x, rows = b * t, block = rows * parts * a;
  const bool zigzag = cp.zigzag;
  V1<T> send = ws.buffer(0, x * block), recv = ws.buffer(1, x * block);
  const T* const src = full.data();
  T* const s = send.data();
  const int64_t width = parts * a, big_t = t * x;
  Kokkos::parallel_for(
      "a2a.pick_rows", Range(0, x * rows), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t to = i / rows, row = i % rows, bb = row / t, lr = row % t;  // rank `to`'s row
        const int64_t at = bb * big_t + ContextParallel::position_of(to, lr, t, x, zigzag);
        for (int64_t k = 0; k < width; ++k) s[i * width + k] = src[at * width + k];
      });
  cp.ring->alltoall<T>(V1<const T>(send.data(), send.size()), recv);
  const T* const r = recv.data();
  T* const dst = local.data();
  Kokkos::parallel_for(
      "a2a.unpack_heads", Range(0, x * rows), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t j = i / rows, row = i % rows;  // block j: rank j's heads of my rows
        for (int64_t p = 0; p < parts; ++p)
          for (int64_t c = 0; c < a; ++c)
            dst[row * parts * w + p * w + j * a + c] = r[(j * rows + row) * parts * a + p * a + c];
      });
}

template <class T>
V2<T> matrix(ContextWorkspace<T>& ws, int slot, int64_t rows, int64_t cols) {
  return V2<T>(ws.buffer(slot, rows * cols).data(), rows, cols);
}

}  // namespace

template <class T>
void all_to_all_attention_forward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> out, V2<T> lse,
                                  V2<const T> qkv, int64_t b, int64_t t, int64_t h,
                                  kernels::ProductPrecision precision) {
  const int64_t x = cp.size, a = out.extent(1) / x, big_t = t * x, heads = h / x;
  if (h % x != 0)
    throw std::logic_error("all-to-all attention: " + std::to_string(h) + " heads over " + std::to_string(x) +
                           " ranks");
  const V2<T> f = matrix(ws, 2, b * big_t, 3 * a), o = matrix(ws, 3, b * big_t, a);
  to_heads<T>(cp, ws, qkv, f, b, t, 3);
  kernels::attention_forward<T>(o, V2<T>(lse.data(), b * heads, big_t), f, b, big_t, heads, precision);
  to_rows<T>(cp, ws, o, out, b, t, 1);
}

template <class T>
void all_to_all_attention_backward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> dqkv, V2<const T> qkv,
                                   V2<const T> out, V2<const T> lse, V2<const T> dout, int64_t b, int64_t t, int64_t h,
                                   kernels::ProductPrecision precision) {
  const int64_t x = cp.size, a = dout.extent(1) / x, big_t = t * x, heads = h / x;
  if (h % x != 0)
    throw std::logic_error("all-to-all attention: " + std::to_string(h) + " heads over " + std::to_string(x) +
                           " ranks");
  const V2<T> f = matrix(ws, 2, b * big_t, 3 * a), o = matrix(ws, 3, b * big_t, a), d_o = matrix(ws, 4, b * big_t, a),
              df = matrix(ws, 5, b * big_t, 3 * a);
  to_heads<T>(cp, ws, qkv, f, b, t, 3);
  to_heads<T>(cp, ws, out, o, b, t, 1);
  to_heads<T>(cp, ws, dout, d_o, b, t, 1);
  kernels::attention_backward<T>(df, f, o, V2<const T>(lse.data(), b * heads, big_t), d_o, b, big_t, heads, precision);
  to_rows<T>(cp, ws, df, dqkv, b, t, 3);
}

void all_to_all_attention_forward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e) {
  if (!cp.active()) return;
  out.add("context", "alltoall", Collective::AllToAll, cp.size, rows * 3 * a * e);
  out.add("context", "alltoall", Collective::AllToAll, cp.size, rows * a * e);
}

void all_to_all_attention_backward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a,
                                           int64_t e) {
  if (!cp.active()) return;
  out.add("context", "alltoall", Collective::AllToAll, cp.size, rows * 3 * a * e, 2);
  out.add("context", "alltoall", Collective::AllToAll, cp.size, rows * a * e, 2);
}

#define STRATA_A2A_ATTENTION_INSTANTIATE(T)                                                                         \
  template void all_to_all_attention_forward<T>(const ContextParallel&, ContextWorkspace<T>&, V2<T>, V2<T>,         \
                                                V2<const T>, int64_t, int64_t, int64_t, kernels::ProductPrecision); \
  template void all_to_all_attention_backward<T>(const ContextParallel&, ContextWorkspace<T>&, V2<T>, V2<const T>,  \
                                                 V2<const T>, V2<const T>, V2<const T>, int64_t, int64_t, int64_t,  \
                                                 kernels::ProductPrecision);
STRATA_A2A_ATTENTION_INSTANTIATE(float)
STRATA_A2A_ATTENTION_INSTANTIATE(double)
#undef STRATA_A2A_ATTENTION_INSTANTIATE

}  // namespace strata
