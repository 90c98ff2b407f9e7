#pragma once
// The row kernels of a mixture-of-experts layer (model/moe_layer.hpp): the router's
// logits and softmax (one row at a time, in a fixed order, so a token's routing is the
// same bits whichever rows share its batch), moving rows to and from the experts'
// buffers, the gate-weighted combination, and the router's backward.
#include <cmath>

#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/elementwise.hpp"

namespace strata::kernels {

// The most experts whose router logits a row sums in a local array.
constexpr int64_t kRouterLocalExperts = 64;

// probs (N, E) = softmax(x (N, C) w (C, E)) row by row; lse (N) its logsumexp.
template <class T>
void router_forward(V2<T> probs, V1<T> lse, V2<const T> x, V2<const T> w) {
  const int64_t c = x.extent(1), e = w.extent(1);
  // on the thread's own copy of the lambda, the logits summed in a local array where the
  // experts fit one (for_each_row: vectorised); each logit's terms in the same order
  // either way
  for_each_row(
      "moe_router", x.extent(0), KOKKOS_LAMBDA(const int64_t t) {
        if (e <= kRouterLocalExperts) {
          T acc[kRouterLocalExperts] = {};
          for (int64_t k = 0; k < c; ++k) {
            const T xv = x(t, k);
            const T* wk = &w(k, 0);
            for (int64_t i = 0; i < e; ++i) acc[i] += xv * wk[i];
          }
          for (int64_t i = 0; i < e; ++i) probs(t, i) = acc[i];
        } else {
          for (int64_t i = 0; i < e; ++i) probs(t, i) = 0;
          for (int64_t k = 0; k < c; ++k) {
            const T xv = x(t, k);
            for (int64_t i = 0; i < e; ++i) probs(t, i) += xv * w(k, i);
          }
        }
        T m = probs(t, 0);
        for (int64_t i = 1; i < e; ++i) m = probs(t, i) > m ? probs(t, i) : m;
        T s = 0;
        for (int64_t i = 0; i < e; ++i) s += kmath::exp(probs(t, i) - m);
        for (int64_t i = 0; i < e; ++i) probs(t, i) = kmath::exp(probs(t, i) - m) / s;
        lse(t) = m + kmath::log(s);
      });
}

// dst (R, C): dst(r) = src(index(r)).
template <class T>
void gather_rows(V2<T> dst, V2<const T> src, V1<const int32_t> index) {
  const int64_t c = dst.extent(1);
  Kokkos::parallel_for(
      "moe_gather_rows", Range(0, dst.extent(0)), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t k = 0; k < c; ++k) dst(r, k) = src(index(r), k);
      });
}

// dst(index(r)) = src(r) for every row r of src (index a permutation onto dst's rows).
template <class T>
void scatter_rows(V2<T> dst, V2<const T> src, V1<const int32_t> index) {
  const int64_t c = src.extent(1);
  Kokkos::parallel_for(
      "moe_scatter_rows", Range(0, src.extent(0)), KOKKOS_LAMBDA(const int64_t r) {
        for (int64_t k = 0; k < c; ++k) dst(index(r), k) = src(r, k);
      });
}

// out (N, C) = sum over j of gate(t, j) y(row(t, j)) (rows < 0: dropped, no term).
template <class T>
void combine_rows(V2<T> out, V2<const T> y, V2<const int32_t> row, V2<const T> gate) {
  const int64_t c = out.extent(1), k = row.extent(1);
  Kokkos::parallel_for(
      "moe_combine", Range(0, out.extent(0)), KOKKOS_LAMBDA(const int64_t t) {
        for (int64_t d = 0; d < c; ++d) out(t, d) = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int32_t r = row(t, j);
          if (r < 0) continue;
          const T g = gate(t, j);
          for (int64_t d = 0; d < c; ++d) out(t, d) += g * y(r, d);
        }
      });
}

// The combination's backward: dgate(t, j) = dout(t) . y(row(t, j)) (0 where dropped) and
// dy(row(t, j)) = gate(t, j) dout(t).
template <class T>
void combine_backward(V2<T> dgate, V2<T> dy, V2<const T> dout, V2<const T> y, V2<const int32_t> row, V2<const T> gate) {
  const int64_t c = dout.extent(1), k = row.extent(1);
  Kokkos::parallel_for(
      "moe_combine_backward", Range(0, dout.extent(0)), KOKKOS_LAMBDA(const int64_t t) {
        for (int64_t j = 0; j < k; ++j) {
          const int32_t r = row(t, j);
          T s = 0;
          if (r >= 0) {
            const T g = gate(t, j);
            for (int64_t d = 0; d < c; ++d) {
              s += dout(t, d) * y(r, d);
              dy(r, d) = g * dout(t, d);
            }
          }
          dgate(t, j) = s;
        }
      });
}

// dx (N, C) = sum over j of dxk(row(t, j)) (the token's input gradient from its experts).
template <class T>
void sum_expert_rows(V2<T> dx, V2<const T> dxk, V2<const int32_t> row) {
  const int64_t c = dx.extent(1), k = row.extent(1);
  Kokkos::parallel_for(
      "moe_sum_rows", Range(0, dx.extent(0)), KOKKOS_LAMBDA(const int64_t t) {
        for (int64_t d = 0; d < c; ++d) dx(t, d) = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int32_t r = row(t, j);
          if (r < 0) continue;
          for (int64_t d = 0; d < c; ++d) dx(t, d) += dxk(r, d);
        }
      });
}

// The router's backward to its logits, dlogits (N, E), from
//  - the gates' gradients dgate (N, k): with renormalise, gate_j = p_{e_j} / sum_j' p_{e_j'}
//    (k >= 2), else gate_j = p_{e_j};
//  - the load-balancing loss: dL/dp(t, i) += aux(i) (alpha E f_i times the loss scale);
//  - the z-loss: dL/dlogit(t, i) += z lse(t) p(t, i) (2 beta times the loss scale);
// through the softmax: dlogit = p (dp - sum_i dp p).
template <class T>
void router_backward(V2<T> dlogits, V2<const T> probs, V1<const T> lse, V2<const int32_t> expert, V2<const T> gate,
                     V2<const T> dgate, V1<const T> aux, T z, bool renormalise) {
  const int64_t e = probs.extent(1), k = expert.extent(1);
  Kokkos::parallel_for(
      "moe_router_backward", Range(0, probs.extent(0)), KOKKOS_LAMBDA(const int64_t t) {
        for (int64_t i = 0; i < e; ++i) dlogits(t, i) = aux(i);  // dp, first
        if (renormalise) {
          T sum = 0, dot = 0;
          for (int64_t j = 0; j < k; ++j) {
            sum += probs(t, expert(t, j));
            dot += dgate(t, j) * gate(t, j);
          }
          for (int64_t j = 0; j < k; ++j) dlogits(t, expert(t, j)) += (dgate(t, j) - dot) / sum;
        } else {
          for (int64_t j = 0; j < k; ++j) dlogits(t, expert(t, j)) += dgate(t, j);
        }
        T dot = 0;
        for (int64_t i = 0; i < e; ++i) dot += dlogits(t, i) * probs(t, i);
        for (int64_t i = 0; i < e; ++i) dlogits(t, i) = probs(t, i) * (dlogits(t, i) - dot) + z * lse(t) * probs(t, i);
      });
}

}  // namespace strata::kernels
