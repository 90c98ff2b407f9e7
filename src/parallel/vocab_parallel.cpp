#include "parallel/vocab_parallel.hpp"

#include <algorithm>
#include <limits>

#include "core/kmath.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/products.hpp"
#include "kernels/residual.hpp"

namespace strata {
namespace {
template <class T>
void ensure(Tensor2<T>& t, int64_t rows, int64_t cols) {
  if (int64_t(t.extent(0)) != rows || int64_t(t.extent(1)) != cols)
    t = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "vocab_parallel.scratch"), rows, cols);
}
// The communicator the vocabulary is split over for the loss.
Comm* loss_comm(const TensorParallel& tp) {
  return tp.mode == TensorMode::OneD     ? tp.group
         : tp.mode == TensorMode::TwoD   ? tp.row
         : tp.mode == TensorMode::ThreeD ? tp.y
                                         : nullptr;
}
}  // namespace

int64_t wte_vocab_begin(const TensorParallel& tp, int64_t v_local) {
  return tp.mode == TensorMode::OneD     ? tp.rank * v_local
         : tp.mode == TensorMode::TwoD   ? tp.i * v_local
         : tp.mode == TensorMode::ThreeD ? tp.iy * v_local
                                         : 0;
}

int64_t logits_vocab_begin(const TensorParallel& tp, int64_t v_local) {
  return tp.mode == TensorMode::OneD     ? tp.rank * v_local
         : tp.mode == TensorMode::TwoD   ? tp.j * v_local
         : tp.mode == TensorMode::ThreeD ? tp.iy * v_local
                                         : 0;
}

template <class T>
void tp_embedding_forward(const TensorParallel& tp, V2<T> out, V1<const int32_t> tokens, V2<const T> wte,
                          V2<const T> wpe, int64_t t_len, Tensor2<T>& scratch) {
  const int64_t vb = wte_vocab_begin(tp, wte.extent(0));
  switch (tp.mode) {
    case TensorMode::Serial:
      kernels::embedding_forward<T>(out, tokens, wte, wpe, t_len);
      break;
    case TensorMode::OneD:
      if (tp.row_split() > 1) {  // every row from my vocabulary block; this rank's rows of the sum
        ensure(scratch, int64_t(tokens.extent(0)), int64_t(out.extent(1)));
        kernels::embedding_lookup_range<T>(scratch, tokens, wte, vb);
        tp.group->reduce_scatter_sum<T>(V1<const T>(scratch.data(), scratch.size()), V1<T>(out.data(), out.size()));
        kernels::add_positions<T>(out, wpe, t_len, tp.rank * int64_t(out.extent(0)));
        break;
      }
      kernels::embedding_lookup_range<T>(out, tokens, wte, vb);
      tp.group->allreduce_sum(V1<T>(out.data(), out.size()));
      kernels::add_positions<T>(out, wpe, t_len);
      break;
    case TensorMode::TwoD:
      // every batch block's rows from my vocabulary block; the column sums them and
      // hands block i to grid row i
      ensure(scratch, int64_t(tokens.extent(0)), int64_t(out.extent(1)));
      kernels::embedding_lookup_range<T>(scratch, tokens, wte, vb);
      tp.col->reduce_scatter_sum<T>(V1<const T>(scratch.data(), scratch.size()), V1<T>(out.data(), out.size()));
      kernels::add_positions<T>(out, wpe, t_len);
      break;
    case TensorMode::ThreeD: {
      // this depth rank's rows from my vocabulary block (width C/X); the Y group sums them
      const int64_t rows = out.extent(0);
      const auto mine = Kokkos::subview(tokens, std::make_pair(tp.iz * rows, (tp.iz + 1) * rows));
      kernels::embedding_lookup_range<T>(out, mine, wte, vb);
      if (tp.ny > 1) tp.y->allreduce_sum(V1<T>(out.data(), out.size()));
      kernels::add_positions<T>(out, wpe, t_len);
      break;
    }
  }
}

template <class T>
void tp_embedding_backward(const TensorParallel& tp, V2<T> dwte, V2<T> dwpe, V2<const T> dout, V1<const int32_t> tokens,
                           int64_t t_len, Tensor2<T>& scratch) {
  const int64_t vb = wte_vocab_begin(tp, dwte.extent(0));
  switch (tp.mode) {
    case TensorMode::Serial:
      kernels::embedding_backward<T>(dwte, dwpe, dout, tokens, t_len);
      break;
    case TensorMode::OneD:
      if (tp.row_split() > 1) {  // every rank's rows of dout, so each vocabulary block finds its tokens
        ensure(scratch, int64_t(tokens.extent(0)), int64_t(dout.extent(1)));
        tp.group->allgather<T>(V1<const T>(dout.data(), dout.size()), V1<T>(scratch.data(), scratch.size()));
        kernels::embedding_backward_range<T>(dwte, dwpe, scratch, tokens, vb, t_len);
        break;
      }
      kernels::embedding_backward_range<T>(dwte, dwpe, dout, tokens, vb, t_len);
      break;
    case TensorMode::TwoD:
      // all batch blocks' gradients of hidden block j, so the vocabulary block finds its
      // tokens' rows; wpe's gradient then comes out the same on every rank of the column
      ensure(scratch, int64_t(tokens.extent(0)), int64_t(dout.extent(1)));
      tp.col->allgather<T>(V1<const T>(dout.data(), dout.size()), V1<T>(scratch.data(), scratch.size()));
      kernels::embedding_backward_range<T>(dwte, dwpe, scratch, tokens, vb, t_len);
      break;
    case TensorMode::ThreeD:
      // every depth rank's rows (the 2D pattern over the depth group): each rank of it then
      // makes the whole gradient of its vocabulary block and of wte's and wpe's columns
      ensure(scratch, int64_t(tokens.extent(0)), int64_t(dout.extent(1)));
      tp.z->allgather<T>(V1<const T>(dout.data(), dout.size()), V1<T>(scratch.data(), scratch.size()));
      kernels::embedding_backward_range<T>(dwte, dwpe, scratch, tokens, vb, t_len);
      break;
  }
}

template <class T>
void tp_head_logits(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> logits, V2<const T> x,
                    V2<const T> wte) {
  if (tp.mode == TensorMode::TwoD) {
    summa_matmul_abt<T>(tp.grid(), precision, logits, x, wte);
    return;
  }
  kernels::product<T>(precision, "N", "T", x, wte, T(0), logits);  // (BT, C)(C, V) -> (BT, V)
  // 3D: partial sums over this rank's columns of C
  if (tp.mode == TensorMode::ThreeD && tp.nx > 1) tp.x->allreduce_sum(V1<T>(logits.data(), logits.size()));
}

template <class T>
void tp_head_backward_input(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dx,
                            V2<const T> dlogits, V2<const T> wte, V2<T> rows) {
  if (tp.mode == TensorMode::TwoD && tp.q > 1) {  // at q = 1, the serial product below
    summa_matmul_ab<T>(tp.grid(), precision, dx, dlogits, wte);
    return;
  }
  if (tp.row_split() > 1) {  // every row's share from my vocabulary block; this rank's rows of the sum
    kernels::product<T>(precision, "N", "N", dlogits, wte, T(0), rows);
    tp.group->reduce_scatter_sum<T>(V1<const T>(rows.data(), rows.size()), V1<T>(dx.data(), dx.size()));
    return;
  }
  kernels::product<T>(precision, "N", "N", dlogits, wte, T(0), dx);  // dx = dlogits wte
  if (tp.mode == TensorMode::OneD) tp.group->allreduce_sum(V1<T>(dx.data(), dx.size()));
  if (tp.mode == TensorMode::ThreeD && tp.ny > 1) tp.y->allreduce_sum(V1<T>(dx.data(), dx.size()));
}

template <class T>
void tp_head_backward_weight(const TensorParallel& tp, kernels::ProductPrecision precision, V2<T> dwte,
                             V2<const T> dlogits, V2<const T> x) {
  if (tp.mode == TensorMode::TwoD && tp.q > 1) {
    Tensor2<T> step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "head.dwte"), dwte.extent(0), dwte.extent(1));
    summa_matmul_atb<T>(tp.grid(), precision, step, dlogits, x);
    kernels::residual_accumulate<T>(V1<T>(dwte.data(), dwte.size()), V1<const T>(step.data(), step.size()));
    return;
  }
  if (tp.mode == TensorMode::ThreeD && tp.nz > 1) {  // this depth rank's rows, summed over the depth group
    Tensor2<T> step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "head.dwte"), dwte.extent(0), dwte.extent(1));
    kernels::product<T>(precision, "T", "N", dlogits, x, T(0), V2<T>(step));
    tp.z->allreduce_sum(V1<T>(step.data(), step.size()));
    kernels::residual_accumulate<T>(V1<T>(dwte.data(), dwte.size()), V1<const T>(step.data(), step.size()));
    return;
  }
  kernels::product<T>(precision, "T", "N", dlogits, x, T(1), dwte);  // dwte += dlogits^T x  (V, C)
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
  Comm* comm = loss_comm(tp);
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
