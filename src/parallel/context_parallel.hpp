#pragma once
// How one model replica's sequences are split over its context group (parallel.context =
// X ranks), with causal load balance: a sequence of T tokens is cut into 2X chunks of
// T/(2X) and context rank r holds chunks r and 2X-1-r, side by side, as a local sequence
// of T/X rows. Under the causal mask, chunk k's queries meet k+1 chunks of keys, so every
// rank's pair meets 2X+1 of them: the same work on every rank (the plain contiguous split
// gives the last rank 2X-1 times the first's). Everything but attention works on the local
// rows alone (embeddings at their global positions, layer norms, MLPs, the loss);
// attention passes keys and values around the ring (parallel/ring_attention.hpp). It does
// not own the communicator (the Grid does). The plain contiguous split (rank r holds
// chunks 2r and 2r+1) is kept beside it for the benchmark that shows the imbalance the
// zigzag removes (bench/ring_attention_balance); runs use the zigzag.
#include "comm/grid.hpp"
#include "core/tensor.hpp"
#include "kernels/residual.hpp"

namespace strata {

struct ContextParallel {
  Comm* ring = nullptr;  // the context group, in context-rank order (Grid::context())
  int size = 1, rank = 0;
  bool zigzag = true;       // false: the contiguous split (benchmarks only)
  bool all_to_all = false;  // attention by all-to-all (parallel.context_mode), else the ring

  bool active() const { return size > 1; }
  // Where rank `of`'s local row i (of t local rows: its two chunks of t/2) sits in its
  // sequence of t x `size` (device code too: the all-to-all form places rows by it).
  KOKKOS_INLINE_FUNCTION static int64_t position_of(int64_t of, int64_t i, int64_t t, int64_t size, bool zigzag) {
    const int64_t n = t / 2;
    const int64_t first = zigzag ? of : 2 * of, second = zigzag ? 2 * size - 1 - of : 2 * of + 1;
    return i < n ? first * n + i : second * n + (i - n);
  }
  // The two chunks this rank holds.
  int first_chunk() const { return zigzag ? rank : 2 * rank; }
  int second_chunk() const { return zigzag ? 2 * size - 1 - rank : 2 * rank + 1; }
  // Of another rank's (`from`'s) keys, which this rank's queries see: the first half of
  // the block only (its first chunk), all of it for the second half of the queries only,
  // all of it for all of them, or none.
  enum class Sees { FirstChunkByAll, AllBySecondChunk, All, None };
  Sees sees(int from) const {
    if (zigzag) return from < rank ? Sees::FirstChunkByAll : Sees::AllBySecondChunk;
    return from < rank ? Sees::All : Sees::None;
  }
  static int64_t chunk_rows(int64_t t, int size) { return t / (2 * size); }
};

inline ContextParallel context_parallel_of(const Grid& grid) {
  ContextParallel cp;
  cp.size = int(grid.shape().context);
  cp.rank = grid.coords().context;
  cp.all_to_all = grid.shape().context_mode == ContextMode::AllToAll;
  if (cp.size > 1) cp.ring = &grid.context();
  return cp;
}

// out (b * t/X values) = this rank's rows of in (b sequences of t values, row-major with
// `width` values per row): token ids, targets.
template <class E>
void gather_local_rows(const ContextParallel& cp, V1<E> out, V1<const E> in, int64_t b, int64_t t, int64_t width = 1) {
  const int64_t tl = 2 * ContextParallel::chunk_rows(t, cp.size), rank = cp.rank, size = cp.size;
  const bool zigzag = cp.zigzag;
  E* const o = out.data();
  const E* const x = in.data();
  Kokkos::parallel_for(
      "context.gather_local_rows", Range(0, b * tl), KOKKOS_LAMBDA(const int64_t i) {
        const int64_t bb = i / tl, r = i % tl, pos = ContextParallel::position_of(rank, r, tl, size, zigzag);
        for (int64_t j = 0; j < width; ++j) o[i * width + j] = x[(bb * t + pos) * width + j];
      });
}

// dst (t rows of `width`) += the local rows' src (t/X rows): a gradient by position (wpe).
template <class T>
void scatter_add_local_rows(const ContextParallel& cp, V2<T> dst, V2<const T> src) {
  const int64_t n = int64_t(src.extent(0)) / 2, w = int64_t(dst.extent(1));
  kernels::residual_accumulate<T>(V1<T>(dst.data() + cp.first_chunk() * n * w, n * w), V1<const T>(src.data(), n * w));
  kernels::residual_accumulate<T>(V1<T>(dst.data() + cp.second_chunk() * n * w, n * w),
                                  V1<const T>(src.data() + n * w, n * w));
}

}  // namespace strata
