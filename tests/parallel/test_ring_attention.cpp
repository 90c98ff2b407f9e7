// Ring attention (parallel/ring_attention.hpp) on context groups of 2, 3 and 4 ranks
// against one rank's fused attention of the whole sequences: each rank's output rows,
// logsumexps and dQ, dK, dV are the fused kernel's at its zigzag rows, in double (1e-12 of
// the largest value, elementwise) and float (1e-6 relative in the 2-norm), with blocks that
// cut the chunks unevenly; and with the contiguous split the balance benchmark compares.
// The all-to-all form (DeepSpeed-Ulysses) likewise, its logsumexps those of whole
// sequences of the rank's heads.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "comm/comm.hpp"
#include "kernels/attention.hpp"
#include "parallel/all_to_all_attention.hpp"
#include "parallel/ring_attention.hpp"
#include "support/host_views.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// ||a - b|| / ||b||, the 2-norm over a whole tensor.
double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

// The worst of out, lse, dqkv against the fused kernel's, as ||a - b|| / ||b|| (and the
// largest |a - b| / max(1, max |b|) where elementwise).
template <class T>
double ring_against_fused(Comm& ring, int64_t b, int64_t t_full, int64_t h, int64_t hs, kernels::AttentionTiling tiling,
                          bool elementwise, bool zigzag = true, bool all_to_all = false) {
  const int x = ring.size();
  const int64_t c = h * hs, t = t_full / x;
  // the whole batch, the same on every rank
  const auto qkv_all = random_vector<T>(size_t(b * t_full * 3 * c), 71, 1.5);
  const auto dout_all = random_vector<T>(size_t(b * t_full * c), 72);
  auto d_qkv = to_device(qkv_all), d_dout = to_device(dout_all);
  Tensor1<T> out("out", b * t_full * c), lse("lse", b * h * t_full), dqkv("dqkv", b * t_full * 3 * c);
  kernels::attention_forward<T>(mat(out, b * t_full, c), mat(lse, b * h, t_full),
                                mat<const T>(d_qkv, b * t_full, 3 * c), b, t_full, h, Precision::FP32, tiling);
  kernels::attention_backward<T>(mat(dqkv, b * t_full, 3 * c), mat<const T>(d_qkv, b * t_full, 3 * c),
                                 mat<const T>(out, b * t_full, c), mat<const T>(lse, b * h, t_full),
                                 mat<const T>(d_dout, b * t_full, c), b, t_full, h, Precision::FP32, tiling);
  // this rank's rows of everything
  ContextParallel cp;
  cp.ring = &ring;
  cp.size = x;
  cp.rank = ring.rank();
  cp.zigzag = zigzag;
  const auto local_of = [&](const Tensor1<T>& all, int64_t seqs, int64_t width) {
    Tensor1<T> mine("local", seqs * t * width);
    gather_local_rows<T>(cp, mine, V1<const T>(all.data(), all.size()), seqs, t_full, width);
    return mine;
  };
  const auto qkv = local_of(d_qkv, b, 3 * c), dout = local_of(d_dout, b, c);
  Tensor1<T> r_out("r_out", b * t * c), r_lse("r_lse", b * h * t), r_dqkv("r_dqkv", b * t * 3 * c);
  ContextWorkspace<T> ws;
  if (all_to_all) {  // the default tiling: its fused kernel runs on whole sequences
    all_to_all_attention_forward<T>(cp, ws, mat(r_out, b * t, c), mat(r_lse, b * h, t), mat<const T>(qkv, b * t, 3 * c),
                                    b, t, h, Precision::FP32);
    all_to_all_attention_backward<T>(cp, ws, mat(r_dqkv, b * t, 3 * c), mat<const T>(qkv, b * t, 3 * c),
                                     mat<const T>(r_out, b * t, c), mat<const T>(r_lse, b * h, t),
                                     mat<const T>(dout, b * t, c), b, t, h, Precision::FP32);
  } else {
    ring_attention_forward<T>(cp, ws, mat(r_out, b * t, c), mat(r_lse, b * h, t), mat<const T>(qkv, b * t, 3 * c), b, t,
                              h, Precision::FP32, tiling);
    ring_attention_backward<T>(cp, ws, mat(r_dqkv, b * t, 3 * c), mat<const T>(qkv, b * t, 3 * c),
                               mat<const T>(r_out, b * t, c), mat<const T>(r_lse, b * h, t),
                               mat<const T>(dout, b * t, c), b, t, h, Precision::FP32, tiling);
  }
  // the workspace holds what the planner counts for it (one forward and backward)
  CHECK(ws.bytes() == ContextWorkspace<T>::bytes_for(all_to_all, b * t, c));
  double worst = 0;
  const auto compare = [&](const Tensor1<T>& got, const Tensor1<T>& want) {
    const auto g = to_host<T>(got), w = to_host<T>(want);
    const std::vector<double> gd(g.begin(), g.end()), wd(w.begin(), w.end());
    worst = std::max(worst, elementwise ? max_rel_error(gd, wd) : relative_l2(gd, wd));
  };
  compare(r_out, local_of(out, b, c));
  compare(r_dqkv, local_of(dqkv, b, 3 * c));
  if (!all_to_all) {
    compare(r_lse, local_of(lse, b * h, 1));  // lse is (B*H, T): the local rows of B*H sequences
  } else {  // whole sequences of this rank's heads: rows [rank, rank + 1) * B*H/X of (B*H, T) per batch row
    const auto want = to_host<T>(lse), got = to_host<T>(r_lse);
    const int64_t heads = h / x;
    std::vector<double> g, w;
    for (int64_t bb = 0; bb < b; ++bb)
      for (int64_t hh = 0; hh < heads; ++hh)
        for (int64_t i = 0; i < t_full; ++i) {
          g.push_back(double(got[size_t((bb * heads + hh) * t_full + i)]));
          w.push_back(double(want[size_t((bb * h + ring.rank() * heads + hh) * t_full + i)]));
        }
    worst = std::max(worst, elementwise ? max_rel_error(g, w) : relative_l2(g, w));
  }
  return worst;
}

}  // namespace

TEST_CASE("ring attention on 2, 3 and 4 ranks equals the fused attention of the whole sequence",
          "[mpi][context][attention]") {
  const int n = world_size(), rank = world_rank();
  for (int x = 2; x <= std::min(n, 4); ++x) {
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank < x ? 0 : MPI_UNDEFINED, rank, &sub);
    if (sub != MPI_COMM_NULL) {
      Comm ring(sub);
      // T = 2x * 7: chunks of 7 rows; blocks of 3 queries by 5 keys, 2 heads per product
      const int64_t t_full = 2 * x * 7;
      const kernels::AttentionTiling tiling{3, 5, 2};
      INFO("context " << x << ", rank " << rank);
      const double dbl = ring_against_fused<double>(ring, 2, t_full, 3, 4, tiling, true);
      CHECK(dbl < 1e-12);
      const double flt = ring_against_fused<float>(ring, 2, t_full, 3, 4, tiling, false);
      CHECK(flt < 1e-6);
      // the default tiling (one block per chunk here), float
      CHECK(ring_against_fused<float>(ring, 1, 2 * x * 16, 2, 8, {0, 0, 0}, false) < 1e-6);
      // the contiguous split (the balance benchmark's comparison) is exact too
      CHECK(ring_against_fused<double>(ring, 2, t_full, 3, 4, tiling, true, false) < 1e-12);
      // the all-to-all form (context_mode = "all-to-all"), 12 heads: 12 / x each
      CHECK(ring_against_fused<double>(ring, 2, t_full, 12, 4, tiling, true, true, true) < 1e-12);
      CHECK(ring_against_fused<float>(ring, 2, t_full, 12, 4, tiling, false, true, true) < 1e-6);
      std::printf(
          "ring attention, context %d: worst relative difference %.1e (double, elementwise), %.1e (float, 2-norm)\n", x,
          dbl, flt);
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}
