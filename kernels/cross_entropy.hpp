#pragma once
// Softmax cross-entropy over a vocabulary, fused: the forward keeps only each row's
// log-sum-exp, the backward recomputes the probabilities and may write dlogits over the
// logits (no (N, V) probability buffer).
#include <stdexcept>
#include <type_traits>

#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/bf16.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fast_exp.hpp"
#include "kernels/lanes.hpp"
#include "kernels/row_reduce.hpp"

namespace strata::kernels {

// The sum of the rows' losses in double, in an order fixed by their count.
template <class T>
double total_loss(V1<const T> losses) {
  return ordered_sum(
      "total_loss", losses.extent(0), 1024, KOKKOS_LAMBDA(const int64_t begin, const int64_t end) {
        double s = 0;
        for (int64_t i = begin; i < end; ++i) s += double(losses(i));
        return s;
      });
}

// logits (N, V), targets (N). Writes losses (N) and lse (N); returns sum of losses.
template <class T>
double cross_entropy_forward(V1<T> losses, V1<T> lse, V2<const T> logits, V1<const int32_t> targets) {
  const int64_t v = logits.extent(1);
  for_each_row(
      "cross_entropy_forward", logits.extent(0), KOKKOS_LAMBDA(const int64_t i) {
        const T* row = &logits(i, 0);
        const T mx = lane_max<T>(v, [&](int64_t j) { return row[j]; });
        const T sum = lane_sum<T>(v, [&](int64_t j) { return fast_exp(row[j] - mx); });
        const T l = mx + kmath::log(sum);
        lse(i) = l;
        losses(i) = l - row[targets(i)];
      });
  return total_loss<T>(losses);
}

// dlogits = scale * (softmax(logits) - onehot(target)); dlogits may alias logits.
// scale is dL/dloss_i, the same for every row (1/N for a mean loss). With a vocabulary
// split over ranks, logits are the columns [vocab_begin, vocab_begin + V) and lse is over
// the whole vocabulary.
template <class T>
void cross_entropy_backward(V2<T> dlogits, V2<const T> logits, V1<const T> lse, V1<const int32_t> targets, T scale,
                            int64_t vocab_begin = 0) {
  const int64_t n = logits.extent(0), v = logits.extent(1);
  for_each_row(
      "cross_entropy_backward", n, KOKKOS_LAMBDA(const int64_t i) {
        const T l = lse(i);
        const T* x = &logits(i, 0);
        T* d = &dlogits(i, 0);
        for (int64_t j = 0; j < v; ++j) d[j] = scale * fast_exp(x[j] - l);  // vectorises
        const int64_t t = int64_t(targets(i)) - vocab_begin;
        if (t >= 0 && t < v) d[t] -= scale;
      });
}

// The same written as bf16 only (dlogits (N, V), rows ld apart), rounded as the products
// round (round_rows_to_bf16): the values cross_entropy_backward writes, rounded, for a
// dlogits only bf16 products read. Host memory only (where products round in a pass of
// their own).
template <class T>
void cross_entropy_backward_bf16(bf16* dlogits, V2<const T> logits, V1<const T> lse, V1<const int32_t> targets, T scale,
                                 int64_t vocab_begin = 0) {
  if constexpr (std::is_same_v<T, float> && Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    const int64_t n = logits.extent(0), v = logits.extent(1);
    for_each_row(
        "cross_entropy_backward", n, KOKKOS_LAMBDA(const int64_t i) {
          constexpr int64_t kSegment = 1024;
          float d[kSegment];
          const T l = lse(i);
          const T* x = &logits(i, 0);
          const int64_t t = int64_t(targets(i)) - vocab_begin;
          for (int64_t j0 = 0; j0 < v; j0 += kSegment) {
            const int64_t nj = v - j0 < kSegment ? v - j0 : kSegment;
            for (int64_t j = 0; j < nj; ++j) d[j] = scale * fast_exp(x[j0 + j] - l);  // vectorises
            if (t >= j0 && t < j0 + nj) d[t - j0] -= scale;
            round_rows_to_bf16(d, 0, dlogits + i * v + j0, 0, 1, nj);
          }
        });
  } else {
    (void)dlogits, (void)logits, (void)lse, (void)targets, (void)scale, (void)vocab_begin;
    throw std::logic_error("cross_entropy_backward_bf16: host float only");
  }
}

// The local half of a vocabulary-parallel cross-entropy: per row, the maximum of this
// rank's logits (into mx).
template <class T>
void row_max(V1<T> mx, V2<const T> logits) {
  const int64_t v = logits.extent(1);
  for_each_row(
      "row_max", logits.extent(0), KOKKOS_LAMBDA(const int64_t i) {
        const T* row = &logits(i, 0);
        mx(i) = lane_max<T>(v, [&](int64_t j) { return row[j]; });
      });
}

// Per row, given the global maximum mx: sums(2i) = sum_j exp(logit_j - mx) over this
// rank's columns, sums(2i+1) = the target's logit if this rank holds it, else 0.
template <class T>
void row_sumexp_and_target(V1<T> sums, V2<const T> logits, V1<const T> mx, V1<const int32_t> targets,
                           int64_t vocab_begin) {
  const int64_t v = logits.extent(1);
  for_each_row(
      "row_sumexp_and_target", logits.extent(0), KOKKOS_LAMBDA(const int64_t i) {
        const T* row = &logits(i, 0);
        const T m = mx(i);
        const T s = lane_sum<T>(v, [&](int64_t j) { return fast_exp(row[j] - m); });
        const int64_t t = int64_t(targets(i)) - vocab_begin;
        sums(2 * i) = s;
        sums(2 * i + 1) = t >= 0 && t < v ? row[t] : T(0);
      });
}

// Classifiers: the samples (rows of logits) whose largest logit is their label (a host
// loop over (B, classes) logits).
template <class T>
int64_t count_correct(V2<const T> logits, V1<const int32_t> labels) {
  const auto h_logits = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);
  const auto h_labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), labels);
  int64_t correct = 0;
  for (int64_t i = 0; i < int64_t(h_logits.extent(0)); ++i) {
    int64_t best = 0;
    for (int64_t k = 1; k < int64_t(h_logits.extent(1)); ++k)
      if (h_logits(i, k) > h_logits(i, best)) best = k;
    correct += best == h_labels(i) ? 1 : 0;
  }
  return correct;
}

}  // namespace strata::kernels
