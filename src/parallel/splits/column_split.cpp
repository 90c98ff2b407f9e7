#include "parallel/splits/column_split.hpp"

#include <stdexcept>
#include <type_traits>

#include "kernels/embedding.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"
#include "parallel/splits/summed_gains.hpp"

namespace strata {
namespace {
constexpr const char* kTensor = "tensor";

[[noreturn]] void bf16_operand_in_sequence_parallel(const char* layer) {
  throw std::logic_error(std::string(layer) + ": an activation kept as bf16 under sequence parallelism");
}
template <class T>
V1<T> flat(V2<T> v) {
  return V1<T>(v.data(), v.size());
}
template <class T>
V1<const T> flat_const(V2<T> v) {
  return V1<const T>(v.data(), v.size());
}
}  // namespace

ColumnSplit ColumnSplit::placed_on(const Grid& grid) const {
  ColumnSplit s = *this;
  s.group = &grid.tensor();
  s.rank = grid.coords().col;
  return s;
}

SplitTraits ColumnSplit::traits() const {
  SplitTraits s;
  s.size = t;
  s.row_split = row_split();
  s.whole_activations = !sequence;
  s.expert_ways = t;
  s.experts = {t, rank, 1};
  return s;
}

SplitDivisions ColumnSplit::divisions() const {
  const std::string cols = "parallel.tensor_cols";
  SplitDivisions d;
  d.heads = {t, cols};
  d.heads_name = "tensor_cols";
  d.width = {{4, {t, cols}}};
  d.vocab = {t, cols};
  d.routed = {t, cols + " for a mixture of experts (each tensor rank routes a share)"};
  d.experts_why = "parallel.expert x parallel.tensor_cols (under a 1D split the tensor ranks are expert ranks too)";
  return d;
}

TensorPart ColumnSplit::part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const {
  TensorPart p = TensorPart::of_shape(shape);
  p.cut_or_replicate(cuts.columns, t, rank);
  return p;
}

template <class T, class Y>
void ColumnSplit::layernorm_forward(const LayerNormCall<T, Y>& c) const {
  kernels::layernorm_forward<T>(c.y, c.mean, c.rstd, c.x, c.w, c.b);
}

template <class T>
void ColumnSplit::layernorm_backward(const LayerNormBackwardCall<T>& c) const {
  if (!sequence) return kernels::layernorm_backward<T>(c.dx, c.dw, c.db, c.dy, c.x, c.w, c.mean, c.rstd, c.accumulate);
  layernorm_backward_gains_summed<T>(c, group);  // this rank's rows' share, summed over the group
}

template <class T, class X>
void ColumnSplit::linear_in_forward(const LinearCall<T, X>& c) const {
  if (!sequence) return kernels::matmul_forward<T>(c.y, c.x, c.w, c.b, c.precision);  // column-parallel: no sums
  if constexpr (std::is_same_v<X, T>) {
    group->allgather<T>(flat_const(c.x), flat(c.rows));
    kernels::matmul_forward<T>(c.y, V2<const T>(c.rows), c.w, c.b, c.precision);
  } else {
    bf16_operand_in_sequence_parallel("linear_in_forward");
  }
}

template <class T>
void ColumnSplit::linear_in_backward_input(const LinearInputCall<T>& c) const {
  if (sequence) {  // every row's share from this rank's output columns; this rank's rows of their sum
    kernels::matmul_backward_input<T>(c.rows, c.dy, c.w, c.precision);
    group->reduce_scatter_sum<T>(flat_const(c.rows), flat(c.dx));
    return;
  }
  kernels::matmul_backward_input<T>(c.dx, c.dy, c.w, c.precision);  // this rank's output columns' share
  group->allreduce_sum(flat(c.dx));
}

template <class T, class X>
void ColumnSplit::linear_out_forward(const LinearCall<T, X>& c) const {
  // row-parallel: partial products over this rank's input features, summed (under
  // sequence parallelism: this rank's rows of the sum), then the bias
  if (!sequence) {
    kernels::product<T>(c.precision, "N", "N", c.x, c.w, T(0), c.y);
    group->allreduce_sum(flat(c.y));
  } else if constexpr (std::is_same_v<X, T>) {
    kernels::product<T>(c.precision, "N", "N", c.x, c.w, T(0), c.rows);
    group->reduce_scatter_sum<T>(flat_const(c.rows), flat(c.y));
  } else {
    bf16_operand_in_sequence_parallel("linear_out_forward");
  }
  kernels::add_bias<T>(c.y, c.b);
}

template <class T>
void ColumnSplit::linear_out_backward_input(const LinearInputCall<T>& c) const {
  if (!sequence) return kernels::matmul_backward_input<T>(c.dx, c.dy, c.w, c.precision);  // dy replicated
  group->allgather<T>(flat_const(c.dy), flat(c.rows));  // every rank's rows of dy, then this rank's columns of dx
  kernels::matmul_backward_input<T>(c.dx, V2<const T>(c.rows), c.w, c.precision);
}

template <class T, class X>
void ColumnSplit::linear_backward_weight(const LinearWeightCall<T, X>& c) const {
  // this rank's columns (in) or rows (out) of dw; an out linear's db is the same everywhere
  kernels::matmul_backward_weight<T>(c.dw, c.db, c.dy, c.x, c.precision);
}

template <class T>
void ColumnSplit::embedding_forward(const EmbeddingCall<T>& c) const {
  const int64_t vb = wte_vocab_begin(c.wte.extent(0));
  if (!sequence) {
    kernels::embedding_lookup_range<T>(c.out, c.tokens, c.wte, vb);
    group->allreduce_sum(flat(c.out));
    return kernels::add_positions<T>(c.out, c.wpe, c.t_len);
  }
  // every row from my vocabulary block; this rank's rows of the sum
  ensure_scratch(c.scratch, int64_t(c.tokens.extent(0)), int64_t(c.out.extent(1)));
  kernels::embedding_lookup_range<T>(c.scratch, c.tokens, c.wte, vb);
  group->reduce_scatter_sum<T>(V1<const T>(c.scratch.data(), c.scratch.size()), flat(c.out));
  kernels::add_positions<T>(c.out, c.wpe, c.t_len, rank * int64_t(c.out.extent(0)));
}

template <class T>
void ColumnSplit::embedding_backward(const EmbeddingBackwardCall<T>& c) const {
  const int64_t vb = wte_vocab_begin(c.dwte.extent(0));
  if (!sequence) return kernels::embedding_backward_range<T>(c.dwte, c.dwpe, c.dout, c.tokens, vb, c.t_len);
  // every rank's rows of dout, so each vocabulary block finds its tokens
  ensure_scratch(c.scratch, int64_t(c.tokens.extent(0)), int64_t(c.dout.extent(1)));
  group->allgather<T>(flat_const(c.dout), V1<T>(c.scratch.data(), c.scratch.size()));
  kernels::embedding_backward_range<T>(c.dwte, c.dwpe, c.scratch, c.tokens, vb, c.t_len);
}

template <class T>
void ColumnSplit::head_logits(const HeadLogitsCall<T>& c) const {
  kernels::product<T>(c.precision, "N", "T", c.x, c.wte, T(0), c.logits);  // this rank's vocabulary columns
}

template <class T>
void ColumnSplit::head_backward_input(const HeadInputCall<T>& c) const {
  if (sequence) {  // every row's share from my vocabulary block; this rank's rows of the sum
    kernels::product<T>(c.precision, "N", "N", c.dlogits, c.wte, T(0), c.rows);
    group->reduce_scatter_sum<T>(flat_const(c.rows), flat(c.dx));
    return;
  }
  kernels::product<T>(c.precision, "N", "N", c.dlogits, c.wte, T(0), c.dx);
  group->allreduce_sum(flat(c.dx));
}

template <class T>
void ColumnSplit::head_backward_weight(const HeadWeightCall<T>& c) const {
  kernels::product<T>(c.precision, "T", "N", c.dlogits, c.x, T(1), c.dwte);
}

STRATA_TENSOR_SPLIT_INSTANTIATE(ColumnSplit)

void ColumnSplit::loss_sum_traffic(Traffic&) const {}
void ColumnSplit::layernorm_forward_traffic(Traffic&, int64_t, int64_t) const {}
void ColumnSplit::sum_traffic(Traffic& out, int64_t rows, int64_t width, int64_t e) const {
  if (sequence)
    out.add(kTensor, "reduce_scatter", Collective::ReduceScatter, t, rows / t * width * e);
  else
    out.add(kTensor, "allreduce", Collective::AllReduce, t, rows * width * e);
}
void ColumnSplit::gather_rows_traffic(Traffic& out, int64_t rows, int64_t width, int64_t e) const {
  if (sequence) out.add(kTensor, "allgather", Collective::AllGather, t, rows / t * width * e);
}
void ColumnSplit::layernorm_backward_traffic(Traffic& out, int64_t, int64_t c_local, int64_t e) const {
  if (sequence) out.add(kTensor, "allreduce", Collective::AllReduce, t, 2 * c_local * e);  // dweight, dbias
}
void ColumnSplit::linear_in_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t, int64_t e) const {
  gather_rows_traffic(out, rows, in, e);
}
void ColumnSplit::linear_in_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t, int64_t e) const {
  sum_traffic(out, rows, in, e);
}
void ColumnSplit::linear_out_forward_traffic(Traffic& out, int64_t rows, int64_t, int64_t out_w, int64_t e) const {
  sum_traffic(out, rows, out_w, e);
}
void ColumnSplit::linear_out_backward_traffic(Traffic& out, int64_t rows, int64_t, int64_t out_w, int64_t e) const {
  gather_rows_traffic(out, rows, out_w, e);  // the output gradient's rows
}
void ColumnSplit::embedding_forward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const {
  sum_traffic(out, rows, c, e);
}
void ColumnSplit::embedding_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const {
  gather_rows_traffic(out, rows, c, e);
}
void ColumnSplit::head_logits_traffic(Traffic& out, int64_t rows, int64_t c, int64_t, int64_t e) const {
  gather_rows_traffic(out, rows, c, e);  // the final layer norm's rows
}
void ColumnSplit::head_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t, int64_t e) const {
  sum_traffic(out, rows, c, e);
}
void ColumnSplit::cross_entropy_forward_traffic(Traffic& out, int64_t rows, int64_t e) const {
  out.add(kTensor, "allreduce_max", Collective::AllReduce, t, rows * e);  // row maxima
  out.add(kTensor, "allreduce", Collective::AllReduce, t, 2 * rows * e);  // sum of exp, target logit
}

}  // namespace strata
