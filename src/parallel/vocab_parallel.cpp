#include "parallel/vocab_parallel.hpp"

#include <algorithm>
#include <limits>

#include "core/kmath.hpp"
#include "kernels/cross_entropy.hpp"

// The embedding and the head are their split's operations (parallel/splits/); the loss
// reduces over the split's vocabulary communicator.
namespace strata {

int64_t wte_vocab_begin(const TensorParallel& tp, int64_t v_local) { return tp.wte_vocab_begin(v_local); }

int64_t logits_vocab_begin(const TensorParallel& tp, int64_t v_local) { return tp.logits_vocab_begin(v_local); }

template <class T>
void tp_embedding_forward(const TensorParallel& tp, V2<T> out, V1<const int32_t> tokens, V2<const T> wte,
                          V2<const T> wpe, int64_t t_len, Tensor2<T>& scratch) {
  const EmbeddingCall<T> call{out, tokens, wte, wpe, t_len, scratch};
  tp.visit([&](const auto& s) { s.template embedding_forward<T>(call); });
}

template <class T>
void tp_embedding_backward(const TensorParallel& tp, V2<T> dwte, V2<T> dwpe, V2<const T> dout, V1<const int32_t> tokens,
                           int64_t t_len, Tensor2<T>& scratch) {
  const EmbeddingBackwardCall<T> call{dwte, dwpe, dout, tokens, t_len, scratch};
  tp.visit([&](const auto& s) { s.template embedding_backward<T>(call); });
}

template <class T>
void tp_head_logits(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> logits, V2<const T> x,
                    V2<const T> wte) {
  const HeadLogitsCall<T> call{precision, logits, x, wte};
  tp.visit([&](const auto& s) { s.template head_logits<T>(call); });
}

template <class T>
void tp_head_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                            V2<const T> dlogits, V2<const T> wte, V2<T> rows) {
  const HeadInputCall<T> call{precision, dx, dlogits, wte, rows};
  tp.visit([&](const auto& s) { s.template head_backward_input<T>(call); });
}

template <class T>
void tp_head_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dwte,
                             V2<const T> dlogits, V2<const T> x) {
  const HeadWeightCall<T> call{precision, dwte, dlogits, x};
  tp.visit([&](const auto& s) { s.template head_backward_weight<T>(call); });
}

template <class T>
void tp_head_backward(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx, V2<T> dwte,
                      V2<const T> dlogits, V2<const T> x, V2<const T> wte) {
  tp_head_backward_weight<T>(tp, precision, dwte, dlogits, x);  // first: dx may alias x
  tp_head_backward_input<T>(tp, precision, dx, dlogits, wte, {});
}

template <class T>
double tp_cross_entropy_forward(const TensorParallel& tp, V1<T> losses, V1<T> lse, V2<const T> logits,
                                V1<const int32_t> targets) {
  Comm* comm = tp.vocab_comm();
  if (!comm) return kernels::cross_entropy_forward<T>(losses, lse, logits, targets);
  const int64_t n = logits.extent(0);
  const int64_t vb = logits_vocab_begin(tp, logits.extent(1));
  Tensor1<T> mx(Kokkos::view_alloc(Kokkos::WithoutInitializing, "ce.max"), n);
  Tensor1<T> sums(Kokkos::view_alloc(Kokkos::WithoutInitializing, "ce.sums"), 2 * n);
  kernels::row_max<T>(mx, logits);
  comm->allreduce_max(V1<T>(mx));
  kernels::row_sumexp_and_target<T>(sums, logits, mx, targets, vb);
  comm->allreduce_sum(V1<T>(sums));
  Kokkos::parallel_for(
      "ce_vocab_parallel_loss", Range(0, n), KOKKOS_LAMBDA(const int64_t i) {
        lse(i) = mx(i) + kmath::log(sums(2 * i));
        losses(i) = lse(i) - sums(2 * i + 1);
      });
  return kernels::total_loss<T>(losses);
}

template <class T>
void tp_mask_padded_logits(const TensorParallel& tp, V2<T> logits, int64_t vocab) {
  const int64_t cols = logits.extent(1), first = std::max<int64_t>(vocab - logits_vocab_begin(tp, cols), 0);
  if (first >= cols) return;
  const int64_t width = cols - first;
  const T minus_inf = -std::numeric_limits<T>::infinity();
  Kokkos::parallel_for(
      "mask_padded_logits", Range(0, int64_t(logits.extent(0)) * width),
      KOKKOS_LAMBDA(const int64_t i) { logits(i / width, first + i % width) = minus_inf; });
}

template <class T>
void tp_cross_entropy_backward(const TensorParallel& tp, V2<T> logits, V1<const T> lse, V1<const int32_t> targets,
                               T scale) {
  kernels::cross_entropy_backward<T>(logits, logits, lse, targets, scale, logits_vocab_begin(tp, logits.extent(1)));
}

void tp_cross_entropy_backward_bf16(const TensorParallel& tp, kernels::bf16* dlogits, V2<const float> logits,
                                    V1<const float> lse, V1<const int32_t> targets, float scale) {
  kernels::cross_entropy_backward_bf16<float>(dlogits, logits, lse, targets, scale,
                                              logits_vocab_begin(tp, logits.extent(1)));
}

#define STRATA_VOCAB_PARALLEL_INSTANTIATE(T)                                                                           \
  template void tp_embedding_forward<T>(const TensorParallel&, V2<T>, V1<const int32_t>, V2<const T>, V2<const T>,     \
                                        int64_t, Tensor2<T>&);                                                         \
  template void tp_embedding_backward<T>(const TensorParallel&, V2<T>, V2<T>, V2<const T>, V1<const int32_t>, int64_t, \
                                         Tensor2<T>&);                                                                 \
  template void tp_head_logits<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>, V2<const T>);  \
  template void tp_head_backward<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<T>, V2<const T>,       \
                                    V2<const T>, V2<const T>);                                                         \
  template void tp_head_backward_input<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>,        \
                                          V2<const T>, V2<T>);                                                         \
  template void tp_head_backward_weight<T>(const TensorParallel&, kernels::ProductPrecision, V2<T>, V2<const T>,       \
                                           V2<const T>);                                                               \
  template double tp_cross_entropy_forward<T>(const TensorParallel&, V1<T>, V1<T>, V2<const T>, V1<const int32_t>);    \
  template void tp_cross_entropy_backward<T>(const TensorParallel&, V2<T>, V1<const T>, V1<const int32_t>, T);         \
  template void tp_mask_padded_logits<T>(const TensorParallel&, V2<T>, int64_t);
STRATA_VOCAB_PARALLEL_INSTANTIATE(float)
STRATA_VOCAB_PARALLEL_INSTANTIATE(double)
#undef STRATA_VOCAB_PARALLEL_INSTANTIATE

}  // namespace strata
