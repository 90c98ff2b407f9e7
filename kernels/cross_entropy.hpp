#pragma once
// Softmax cross-entropy over a vocabulary, fused: the forward keeps only each row's
// log-sum-exp, the backward recomputes the probabilities and may write dlogits over the
// logits (no (N, V) probability buffer).
#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/fast_exp.hpp"

namespace strata::kernels {

// logits (N, V), targets (N). Writes losses (N) and lse (N); returns sum of losses.
template <class T>
double cross_entropy_forward(V1<T> losses, V1<T> lse, V2<const T> logits, V1<const int32_t> targets) {
  const int64_t n = logits.extent(0), v = logits.extent(1);
  double total = 0;
  Kokkos::parallel_reduce(
      "cross_entropy_forward", Range(0, n),
      KOKKOS_LAMBDA(const int64_t i, double& acc) {
        const T* row = &logits(i, 0);
        T mx = row[0];
        for (int64_t j = 1; j < v; ++j) mx = row[j] > mx ? row[j] : mx;
        T sum = 0;
        for (int64_t j = 0; j < v; ++j) sum += fast_exp(row[j] - mx);
        const T l = mx + kmath::log(sum);
        lse(i) = l;
        losses(i) = l - row[targets(i)];
        acc += double(losses(i));
      },
      total);
  return total;
}

// dlogits = scale * (softmax(logits) - onehot(target)); dlogits may alias logits.
// scale is dL/dloss_i, the same for every row (1/N for a mean loss).
template <class T>
void cross_entropy_backward(V2<T> dlogits, V2<const T> logits, V1<const T> lse, V1<const int32_t> targets, T scale) {
  const int64_t n = logits.extent(0), v = logits.extent(1);
  Kokkos::parallel_for(
      "cross_entropy_backward", Range(0, n), KOKKOS_LAMBDA(const int64_t i) {
        const T l = lse(i);
        const T* x = &logits(i, 0);
        T* d = &dlogits(i, 0);
        for (int64_t j = 0; j < v; ++j) d[j] = scale * fast_exp(x[j] - l);  // vectorises
        d[targets(i)] -= scale;
      });
}

}  // namespace strata::kernels
