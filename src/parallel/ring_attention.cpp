#include "parallel/ring_attention.hpp"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace strata {
namespace {

constexpr int kBlockTag = 0x5241;     // K|V blocks on their way round
constexpr int kGradientTag = 0x5247;  // dK|dV sums on their way to the block's owner

// A (B*t, 2A) block: keys | values, or their gradients, in a slot of the model's
// workspace, with its host copy for MPI (the same memory in CPU builds; GPU builds stage
// through it: MPICH here is not CUDA-aware).
template <class T>
struct RingBlock {
  V2<T> values;
  typename ContextWorkspace<T>::Staged staged;
  RingBlock(ContextWorkspace<T>& ws, int slot, int64_t rows, int64_t cols) : staged(ws.staged(slot, rows * cols)) {
    values = V2<T>(staged.device.data(), rows, cols);
  }
  int64_t size() const { return int64_t(values.size()); }
  Comm::Request send(Comm& ring, int peer, int tag) const {
    Kokkos::deep_copy(staged.host, staged.device);
    return ring.start_send<T>(staged.host.data(), size(), peer, tag);
  }
  Comm::Request recv(Comm& ring, int peer, int tag) {
    return ring.start_recv<T>(staged.host.data(), size(), peer, tag);
  }
  void received() { Kokkos::deep_copy(staged.device, staged.host); }
  kernels::HeadMatrices<T> keys(int64_t t, int64_t hs) {
    return kernels::head_columns<T>(values.data(), t, values.extent(1), 0, hs);
  }
  kernels::HeadMatrices<T> vals(int64_t t, int64_t hs) {
    return kernels::head_columns<T>(values.data(), t, values.extent(1), values.extent(1) / 2, hs);
  }
};

// The K|V columns [A, 3A) of qkv (B*t, 3A) into block (B*t, 2A); or block added to them.
template <class T>
void copy_key_values(V2<T> block, V2<const T> qkv) {
  const int64_t w = block.extent(1), a = w / 2;
  T* const dst = block.data();
  const T* const src = qkv.data();
  Kokkos::parallel_for(
      "ring_attention.pack", Range(0, block.extent(0)), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t j = 0; j < w; ++j) dst[r * w + j] = src[r * 3 * a + a + j];
      });
}
template <class T>
void add_key_values(V2<T> dqkv, V2<const T> block) {
  const int64_t w = block.extent(1), a = w / 2;
  T* const dst = dqkv.data();
  const T* const src = block.data();
  Kokkos::parallel_for(
      "ring_attention.unpack_add", Range(0, block.extent(0)), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t j = 0; j < w; ++j) dst[r * 3 * a + a + j] += src[r * w + j];
      });
}

// The span of this rank's queries that sees the block of rank `from` (!= cp.rank),
// unmasked, merged into what earlier steps gave; nk = 0 where it sees none of it.
kernels::AttentionSpan visiting_span(const ContextParallel& cp, int from, int64_t t) {
  const int64_t n = t / 2;
  switch (cp.sees(from)) {
    case ContextParallel::Sees::FirstChunkByAll:
      return {0, t, 0, n, false, true};
    case ContextParallel::Sees::AllBySecondChunk:
      return {n, n, 0, t, false, true};
    case ContextParallel::Sees::All:
      return {0, t, 0, t, false, true};
    case ContextParallel::Sees::None:
      break;
  }
  return {0, t, 0, 0, false, true};
}

}  // namespace

template <class T>
void ring_attention_forward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> out, V2<T> lse, V2<const T> qkv,
                            int64_t b, int64_t t, int64_t h, kernels::ProductPrecision precision,
                            kernels::AttentionTiling tiling) {
  using namespace kernels;
  const int64_t a = out.extent(1), hs = a / h;
  if (tiling.rows == 0) tiling = attention_tiling(t, h);
  const int x = cp.size, next = (cp.rank + 1) % x, prev = (cp.rank + x - 1) % x;
  Comm& ring = *cp.ring;
  const auto rounded_qkv = round_for_pass(precision, qkv.data(), int64_t(qkv.size()));
  const auto q = head_columns<const T>(qkv.data(), t, 3 * a, 0, hs);
  const auto o = head_columns<T>(out.data(), t, a, 0, hs);
  RingBlock<T> pair[2] = {{ws, 0, b * t, 2 * a}, {ws, 1, b * t, 2 * a}};
  RingBlock<T>* blocks[2] = {&pair[0], &pair[1]};
  copy_key_values<T>(blocks[0]->values, qkv);
  for (int s = 0; s < x; ++s) {
    RingBlock<T>& here = *blocks[s % 2];
    Comm::Request transfers[2];  // the next step's block, while this one is computed
    if (s + 1 < x) {
      transfers[0] = here.send(ring, next, kBlockTag);
      transfers[1] = blocks[(s + 1) % 2]->recv(ring, prev, kBlockTag);
    }
    const std::function<void()> progress = [&] { ring.progress(transfers, 2); };
    if (s == 0) {  // the rank's own keys: the local causal mask
      attention_forward_span<T>(o, lse.data(), t, q, head_columns<const T>(qkv.data(), t, 3 * a, a, hs),
                                head_columns<const T>(qkv.data(), t, 3 * a, 2 * a, hs), b, h, hs,
                                {0, t, 0, t, true, false}, precision, tiling, progress);
    } else {
      const auto rounded_block = round_for_pass(precision, here.values.data(), here.size());
      const auto span = visiting_span(cp, (cp.rank - s + x) % x, t);
      if (span.nk > 0)
        attention_forward_span<T>(o, lse.data(), t, q, as_const(here.keys(t, hs)), as_const(here.vals(t, hs)), b, h, hs,
                                  span, precision, tiling, progress);
    }
    if (s + 1 < x) {
      ring.wait(transfers[1], "recv");
      ring.wait(transfers[0], "send");
      blocks[(s + 1) % 2]->received();
    }
  }
}

template <class T>
void ring_attention_backward(const ContextParallel& cp, ContextWorkspace<T>& ws, V2<T> dqkv, V2<const T> qkv,
                             V2<const T> out, V2<const T> lse, V2<const T> dout, int64_t b, int64_t t, int64_t h,
                             kernels::ProductPrecision precision, kernels::AttentionTiling tiling) {
  using namespace kernels;
  const int64_t a = dout.extent(1), hs = a / h;
  if (tiling.rows == 0) tiling = attention_tiling(t, h);
  const int x = cp.size, next = (cp.rank + 1) % x, prev = (cp.rank + x - 1) % x;
  Comm& ring = *cp.ring;
  const auto rounded_qkv = round_for_pass(precision, qkv.data(), int64_t(qkv.size()));
  const auto rounded_dout = round_for_pass(precision, dout.data(), int64_t(dout.size()));
  Tensor1<T> d_rows(Kokkos::view_alloc(Kokkos::WithoutInitializing, "ring_attention.d"), b * h * t);
  attention_row_dots<T>(d_rows.data(), out, dout, b, t, h);
  const auto part = [&](int64_t i) { return head_columns<const T>(qkv.data(), t, 3 * a, i * a, hs); };
  const auto dpart = [&](int64_t i) { return head_columns<T>(dqkv.data(), t, 3 * a, i * a, hs); };
  const auto dy = head_columns<const T>(dout.data(), t, a, 0, hs);
  RingBlock<T> pair[2] = {{ws, 0, b * t, 2 * a}, {ws, 1, b * t, 2 * a}};
  RingBlock<T>* blocks[2] = {&pair[0], &pair[1]};
  // dK|dV sums: the one computed now, the one on its way out, the one received
  RingBlock<T> sums[2] = {{ws, 2, b * t, 2 * a}, {ws, 3, b * t, 2 * a}};
  RingBlock<T>* work = &sums[0];
  RingBlock<T>* sending = &sums[1];
  RingBlock<T> in(ws, 4, b * t, 2 * a);
  Comm::Request sum_sent, sum_got;
  copy_key_values<T>(blocks[0]->values, qkv);
  for (int s = 0; s < x; ++s) {
    RingBlock<T>& here = *blocks[s % 2];
    // the next step's block, and the dK|dV sums on their way (posted in the last step)
    Comm::Request transfers[4] = {{}, {}, sum_sent, sum_got};
    if (s + 1 < x) {
      transfers[0] = here.send(ring, next, kBlockTag);
      transfers[1] = blocks[(s + 1) % 2]->recv(ring, prev, kBlockTag);
    }
    const std::function<void()> progress = [&] { ring.progress(transfers, 4); };
    Comm::Request& sent = transfers[0];
    Comm::Request& got = transfers[1];
    if (s == 0) {  // dQ written, the rank's own dK, dV from zero, under the local causal mask
      zero_key_value_columns<T>(dqkv);
      attention_backward_span<T>(dpart(0), dpart(1), dpart(2), part(0), part(1), part(2), dy, lse.data(), d_rows.data(),
                                 t, b, h, hs, {0, t, 0, t, true, false}, precision, tiling, progress);
    } else {
      Kokkos::deep_copy(work->values, T(0));
      {
        const auto rounded_block = round_for_pass(precision, here.values.data(), here.size());
        const auto span = visiting_span(cp, (cp.rank - s + x) % x, t);
        if (span.nk > 0)
          attention_backward_span<T>(dpart(0), work->keys(t, hs), work->vals(t, hs), part(0),
                                     as_const(here.keys(t, hs)), as_const(here.vals(t, hs)), dy, lse.data(),
                                     d_rows.data(), t, b, h, hs, span, precision, tiling, progress);
      }
      sum_sent = transfers[2];  // as far as progress took them
      sum_got = transfers[3];
      if (s >= 2) {  // the sum of the ranks that saw this block before
        ring.wait(sum_got, "recv");
        in.received();
        kernels::residual_accumulate<T>(V1<T>(work->values.data(), work->size()),
                                        V1<const T>(in.values.data(), in.size()));
      }
      ring.wait(sum_sent, "send");
      std::swap(work, sending);
      sum_sent = sending->send(ring, next, kGradientTag);
      sum_got = in.recv(ring, prev, kGradientTag);  // the next step's, or after the last, this rank's own
    }
    if (s + 1 < x) {
      ring.wait(got, "recv");
      ring.wait(sent, "send");
      blocks[(s + 1) % 2]->received();
    }
  }
  if (x > 1) {  // every other rank's part of this rank's dK, dV
    ring.wait(sum_got, "recv");
    in.received();
    add_key_values<T>(dqkv, in.values);
    ring.wait(sum_sent, "send");
  }
}

void ring_attention_forward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e) {
  if (!cp.active()) return;
  out.add("context", "send", Collective::Send, cp.size, rows * 2 * a * e, cp.size - 1);
  out.add("context", "recv", Collective::Send, cp.size, 0, cp.size - 1);
}

void ring_attention_backward_traffic(Traffic& out, const ContextParallel& cp, int64_t rows, int64_t a, int64_t e) {
  if (!cp.active()) return;
  out.add("context", "send", Collective::Send, cp.size, rows * 2 * a * e, 2 * (cp.size - 1));
  out.add("context", "recv", Collective::Send, cp.size, 0, 2 * (cp.size - 1));
}

#define STRATA_RING_ATTENTION_INSTANTIATE(T)                                                                       \
  template void ring_attention_forward<T>(const ContextParallel&, ContextWorkspace<T>&, V2<T>, V2<T>, V2<const T>, \
                                          int64_t, int64_t, int64_t, kernels::ProductPrecision,                    \
                                          kernels::AttentionTiling);                                               \
  template void ring_attention_backward<T>(const ContextParallel&, ContextWorkspace<T>&, V2<T>, V2<const T>,       \
                                           V2<const T>, V2<const T>, V2<const T>, int64_t, int64_t, int64_t,       \
                                           kernels::ProductPrecision, kernels::AttentionTiling);
STRATA_RING_ATTENTION_INSTANTIATE(float)
STRATA_RING_ATTENTION_INSTANTIATE(double)
#undef STRATA_RING_ATTENTION_INSTANTIATE

}  // namespace strata
