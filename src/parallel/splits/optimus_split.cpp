#include "parallel/splits/optimus_split.hpp"

#include <stdexcept>
#include <type_traits>

#include "kernels/embedding.hpp"
#include "kernels/residual.hpp"
#include "parallel/tp2d_layernorm.hpp"
#include "parallel/tp2d_linear.hpp"

namespace strata {
namespace {
constexpr const char* kRow = "grid_row";
constexpr const char* kCol = "grid_col";

// the SUMMA broadcasts its operands' blocks as T
[[noreturn]] void bf16_operand_in_2d(const char* layer) {
  throw std::logic_error(std::string(layer) + ": an activation kept as bf16 under the 2D split");
}

// SUMMA on a q x q grid (summa.hpp), with the operands' local block shapes
void summa_ab_traffic(Traffic& out, int q, int64_t m, int64_t k, int64_t n, int64_t e) {  // a (m,k) b (k,n)
  if (q == 1) return;
  out.add(kRow, "broadcast", Collective::Broadcast, q, m * k * e, q);  // A_it along the row, each step
  out.add(kCol, "broadcast", Collective::Broadcast, q, k * n * e, q);  // B_tj down the column
}
void summa_abt_traffic(Traffic& out, int q, int64_t m, int64_t k, int64_t n, int64_t e) {  // a (m,k) b (n,k)
  if (q == 1) return;
  out.add(kCol, "broadcast", Collective::Broadcast, q, n * k * e, q);  // B_tj down the column
  out.add(kRow, "reduce", Collective::Reduce, q, m * n * e, q);        // partial C_it along the row
}
void summa_atb_traffic(Traffic& out, int q, int64_t k, int64_t m, int64_t n, int64_t e) {  // a (k,m) b (k,n)
  if (q == 1) return;
  out.add(kRow, "broadcast", Collective::Broadcast, q, k * m * e, q);  // A_it along the row
  out.add(kCol, "reduce", Collective::Reduce, q, m * n * e, q);        // partial C_tj down the column
}
// linear2d_backward (tp2d_linear.cpp): dx = ABT(dy, w), dw = ATB(x, dy), the bias
// gradient summed over the column
void linear2d_backward_traffic(Traffic& out, int q, int64_t rows, int64_t in, int64_t out_w, int64_t e) {
  if (q == 1) return;
  summa_abt_traffic(out, q, rows, out_w, in, e);
  summa_atb_traffic(out, q, rows, in, out_w, e);
  out.add(kCol, "allreduce", Collective::AllReduce, q, out_w * e);
}
}  // namespace

OptimusSplit OptimusSplit::placed_on(const Grid& grid) const {
  OptimusSplit s = *this;
  s.group = &grid.tensor();
  s.row = &grid.tensor_row(), s.col = &grid.tensor_col();
  s.i = grid.coords().row, s.j = grid.coords().col;
  return s;
}

SplitTraits OptimusSplit::traits() const {
  SplitTraits s;
  s.size = q * q;
  s.residual_parts = q;
  s.whole_activations = false;
  s.batch = {q, i};
  s.multiplies_moved_blocks = true;
  s.bf16_dlogits = false;  // SUMMA broadcasts the floats
  s.head_multiplies_moved_blocks = q > 1;
  return s;
}

SplitDivisions OptimusSplit::divisions() const {
  const std::string q_rows = "q = parallel.tensor_rows";
  SplitDivisions d;
  d.heads = {q, q_rows};
  d.heads_name = "q";
  d.width = {{1, {q * q, "q^2"}}};
  d.vocab = {q, q_rows};
  d.batch = {q, q_rows};
  d.refuses_experts =
      "does not run with tensor_mode = \"2d\": the 2D split keeps the activations in (batch / q) x (C / q) blocks, "
      "and a mixture routes whole tokens (use tensor_mode = \"1d\" or \"3d\", whose tensor ranks route a share of "
      "the tokens each)";
  return d;
}

TensorPart OptimusSplit::part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const {
  TensorPart p = TensorPart::of_shape(shape);
  p.cut_or_replicate(cuts.grid_row, q, i);
  p.cut_or_replicate(cuts.grid_col, q, j);
  return p;
}

template <class T, class Y>
void OptimusSplit::layernorm_forward(const LayerNormCall<T, Y>& c) const {
  if constexpr (std::is_same_v<Y, T>)
    layernorm2d_forward<T>(grid(), c.c_total, c.y, c.mean, c.rstd, c.x, c.w, c.b);
  else
    bf16_operand_in_2d("layernorm_forward");
}
template <class T>
void OptimusSplit::layernorm_backward(const LayerNormBackwardCall<T>& c) const {
  layernorm2d_backward<T>(grid(), c.c_total, c.dx, c.dw, c.db, c.dy, c.x, c.w, c.mean, c.rstd, c.accumulate);
}
template <class T, class X>
void OptimusSplit::linear_in_forward(const LinearCall<T, X>& c) const {
  if constexpr (std::is_same_v<X, T>)
    linear2d_forward<T>(grid(), c.precision, c.y, c.x, c.w, c.b);
  else
    bf16_operand_in_2d("linear_in_forward");
}
template <class T>
void OptimusSplit::linear_in_backward_input(const LinearInputCall<T>& c) const {
  linear2d_backward_input<T>(grid(), c.precision, c.dx, c.dy, c.w);
}
template <class T, class X>
void OptimusSplit::linear_out_forward(const LinearCall<T, X>& c) const {
  linear_in_forward<T, X>(c);
}
template <class T>
void OptimusSplit::linear_out_backward_input(const LinearInputCall<T>& c) const {
  linear_in_backward_input<T>(c);
}
template <class T, class X>
void OptimusSplit::linear_backward_weight(const LinearWeightCall<T, X>& c) const {
  if constexpr (std::is_same_v<X, T>)
    linear2d_backward_weight<T>(grid(), c.precision, c.dw, c.db, c.dy, c.x);
  else
    bf16_operand_in_2d("linear_backward_weight");
}

template <class T>
void OptimusSplit::embedding_forward(const EmbeddingCall<T>& c) const {
  // every batch block's rows from my vocabulary block; the column sums them and hands
  // block i to grid row i
  ensure_scratch(c.scratch, int64_t(c.tokens.extent(0)), int64_t(c.out.extent(1)));
  kernels::embedding_lookup_range<T>(c.scratch, c.tokens, c.wte, wte_vocab_begin(c.wte.extent(0)));
  col->reduce_scatter_sum<T>(V1<const T>(c.scratch.data(), c.scratch.size()), V1<T>(c.out.data(), c.out.size()));
  kernels::add_positions<T>(c.out, c.wpe, c.t_len);
}
template <class T>
void OptimusSplit::embedding_backward(const EmbeddingBackwardCall<T>& c) const {
  // all batch blocks' gradients of hidden block j, so the vocabulary block finds its
  // tokens' rows; wpe's gradient then comes out the same on every rank of the column
  ensure_scratch(c.scratch, int64_t(c.tokens.extent(0)), int64_t(c.dout.extent(1)));
  col->allgather<T>(V1<const T>(c.dout.data(), c.dout.size()), V1<T>(c.scratch.data(), c.scratch.size()));
  kernels::embedding_backward_range<T>(c.dwte, c.dwpe, c.scratch, c.tokens, wte_vocab_begin(c.dwte.extent(0)), c.t_len);
}

template <class T>
void OptimusSplit::head_logits(const HeadLogitsCall<T>& c) const {
  summa_matmul_abt<T>(grid(), c.precision, c.logits, c.x, c.wte);
}
template <class T>
void OptimusSplit::head_backward_input(const HeadInputCall<T>& c) const {
  if (q > 1)
    summa_matmul_ab<T>(grid(), c.precision, c.dx, c.dlogits, c.wte);
  else  // at q = 1, the serial product
    kernels::product<T>(c.precision, "N", "N", c.dlogits, c.wte, T(0), c.dx);
}
template <class T>
void OptimusSplit::head_backward_weight(const HeadWeightCall<T>& c) const {
  if (q == 1) return kernels::product<T>(c.precision, "T", "N", c.dlogits, c.x, T(1), c.dwte);
  Tensor2<T> step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "head.dwte"), c.dwte.extent(0), c.dwte.extent(1));
  summa_matmul_atb<T>(grid(), c.precision, step, c.dlogits, c.x);
  kernels::residual_accumulate<T>(V1<T>(c.dwte.data(), c.dwte.size()), V1<const T>(step.data(), step.size()));
}

STRATA_TENSOR_SPLIT_INSTANTIATE(OptimusSplit)

void OptimusSplit::gather_rows_traffic(Traffic&, int64_t, int64_t, int64_t) const {}  // (rows not split)
void OptimusSplit::loss_sum_traffic(Traffic& out) const {
  out.add(kCol, "allreduce_scalar", Collective::AllReduce, q, sizeof(double));
}
void OptimusSplit::layernorm_forward_traffic(Traffic& out, int64_t rows, int64_t e) const {
  if (q > 1) out.add(kRow, "allgather", Collective::AllGather, q, 2 * rows * e);  // (mean, M2) per token
}
void OptimusSplit::layernorm_backward_traffic(Traffic& out, int64_t rows, int64_t c_local, int64_t e) const {
  if (q == 1) return;
  out.add(kRow, "allreduce", Collective::AllReduce, q, 2 * rows * e);     // two sums per token
  out.add(kCol, "allreduce", Collective::AllReduce, q, 2 * c_local * e);  // dweight, dbias
}
void OptimusSplit::linear_in_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  summa_ab_traffic(out, q, rows, in, out_w, e);
}
void OptimusSplit::linear_in_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  linear2d_backward_traffic(out, q, rows, in, out_w, e);
}
void OptimusSplit::linear_out_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  summa_ab_traffic(out, q, rows, in, out_w, e);
}
void OptimusSplit::linear_out_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  linear2d_backward_traffic(out, q, rows, in, out_w, e);
}
void OptimusSplit::embedding_forward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const {
  out.add(kCol, "reduce_scatter", Collective::ReduceScatter, q, rows * c * e);  // even at q = 1
}
void OptimusSplit::embedding_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const {
  out.add(kCol, "allgather", Collective::AllGather, q, rows * c * e);
}
void OptimusSplit::head_logits_traffic(Traffic& out, int64_t rows, int64_t c, int64_t v, int64_t e) const {
  summa_abt_traffic(out, q, rows, c, v, e);
}
void OptimusSplit::head_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t v, int64_t e) const {
  summa_atb_traffic(out, q, rows, v, c, e);  // dwte = dlogits^T x
  summa_ab_traffic(out, q, rows, v, c, e);   // dx = dlogits wte
}
void OptimusSplit::cross_entropy_forward_traffic(Traffic& out, int64_t rows, int64_t e) const {
  out.add(kRow, "allreduce_max", Collective::AllReduce, q, rows * e);  // row maxima
  out.add(kRow, "allreduce", Collective::AllReduce, q, 2 * rows * e);  // sum of exp, target logit
}

}  // namespace strata
