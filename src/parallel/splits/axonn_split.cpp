#include "parallel/splits/axonn_split.hpp"

#include <stdexcept>
#include <type_traits>

#include "kernels/embedding.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/residual.hpp"
#include "parallel/splits/summed_gains.hpp"
#include "parallel/tp2d_layernorm.hpp"

namespace strata {
namespace {
constexpr const char* kX = "tensor_x";
constexpr const char* kY = "tensor_y";
constexpr const char* kDepth = "tensor_depth";

// the depth group's gathers move T
[[noreturn]] void bf16_operand_in_3d(const char* layer) {
  throw std::logic_error(std::string(layer) + ": an activation kept as bf16 under the 3D split");
}
template <class T>
V1<const T> shard_of(V2<const T> w) {
  return V1<const T>(w.data(), w.size());
}
template <class T>
Linear3DTransfers<T>& transfers_of(Linear3DTransfers<T>* transfers) {
  if (!transfers) throw std::logic_error("AxonnSplit: a 3D linear without its transfers (the block's workspace)");
  return *transfers;
}
}  // namespace

AxonnSplit AxonnSplit::placed_on(const Grid& grid) const {
  AxonnSplit s = *this;
  s.group = &grid.tensor();
  s.x = grid.tensor_x(), s.y = grid.tensor_y(), s.z = grid.tensor_depth();
  s.ix = grid.coords().x, s.iy = grid.coords().y, s.iz = grid.coords().depth;
  return s;
}

SplitTraits AxonnSplit::traits() const {
  SplitTraits s;
  s.size = nx * ny * nz;
  s.residual_parts = nx;
  s.whole_activations = false;
  s.expert_ways = s.size;
  s.batch = {nz, iz};
  s.multiplies_moved_blocks = nz > 1;
  s.gathers_weight_blocks = true;
  s.bf16_dlogits = false;  // the depth group sums the floats
  s.experts = {nx * ny, iy * nx + ix, nx};
  return s;
}

std::vector<SplitGroup> AxonnSplit::expert_part_groups() const {
  std::vector<SplitGroup> out;
  if (nx > 1) out.push_back({x, nx, "tensor_x"});
  if (ny > 1) out.push_back({y, ny, "tensor_y"});
  return out;
}

SplitDivisions AxonnSplit::divisions() const {
  SplitDivisions d;
  d.heads = {ny, "parallel.tensor_y"};
  d.heads_name = "tensor_y";
  d.width = {{1, {nx * nz, "parallel.tensor_x x parallel.tensor_depth"}},
             {1, {ny * nz, "parallel.tensor_y x parallel.tensor_depth"}}};
  d.vocab = {ny, "parallel.tensor_y"};
  d.batch = {nz, "parallel.tensor_depth"};
  d.routed = {nx * ny,
              "parallel.tensor_x x parallel.tensor_y for a mixture of experts (each rank of an X x Y plane routes a "
              "share)"};
  d.routed_tokens = "a micro-batch's tokens per depth rank";
  d.experts_why =
      "parallel.expert x tensor_x x tensor_y x tensor_depth (under a 3D split the tensor ranks are expert ranks too)";
  return d;
}

// a dimension the depth group cuts too is cut in (group x depth) parts, the depth index
// fastest: this depth rank's rows of the group's block
TensorPart AxonnSplit::part_of(const std::vector<int64_t>& shape, const TensorCuts& cuts) const {
  TensorPart p = TensorPart::of_shape(shape);
  const auto cut = [&](int dim, int parts, int index) {
    if (dim < 0) return p.replicate(parts, index);
    if (cuts.depth >= 0 && cuts.depth == dim) return p.cut(dim, parts * nz, index * nz + iz);
    p.cut(dim, parts, index);
  };
  cut(cuts.x, nx, ix);
  cut(cuts.y, ny, iy);
  if (cuts.depth < 0) p.replicate(nz, iz);
  return p;
}

// an "in" or "out" linear's forward, by the groups it is given
template <class T, class X>
void axonn_linear_forward(const Linear3DGroups& groups, const LinearCall<T, X>& c) {
  if constexpr (std::is_same_v<X, T>)
    linear3d_forward<T>(groups, c.precision, c.y, c.x, shard_of(c.w), c.b, transfers_of(c.transfers));
  else
    bf16_operand_in_3d("linear_forward");
}

template <class T, class Y>
void AxonnSplit::layernorm_forward(const LayerNormCall<T, Y>& c) const {
  if (nx == 1)
    kernels::layernorm_forward<T>(c.y, c.mean, c.rstd, c.x, c.w, c.b);
  else if constexpr (std::is_same_v<Y, T>)
    layernorm2d_forward<T>(layernorm_groups(), c.c_total, c.y, c.mean, c.rstd, c.x, c.w, c.b);
  else
    bf16_operand_in_3d("layernorm_forward");
}

template <class T>
void AxonnSplit::layernorm_backward(const LayerNormBackwardCall<T>& c) const {
  if (nx > 1)
    return layernorm2d_backward<T>(layernorm_groups(), c.c_total, c.dx, c.dw, c.db, c.dy, c.x, c.w, c.mean, c.rstd,
                                   c.accumulate);
  layernorm_backward_gains_summed<T>(c, nz > 1 ? z : nullptr);  // the whole width here; the rows over depth
}

template <class T, class X>
void AxonnSplit::linear_in_forward(const LinearCall<T, X>& c) const {
  axonn_linear_forward<T, X>(in_linear(), c);
}
template <class T>
void AxonnSplit::linear_in_backward_input(const LinearInputCall<T>& c) const {
  linear3d_backward_input<T>(in_linear(), c.precision, c.dx, c.dy, shard_of(c.w), transfers_of(c.transfers));
}
template <class T, class X>
void AxonnSplit::linear_out_forward(const LinearCall<T, X>& c) const {
  axonn_linear_forward<T, X>(out_linear(), c);
}
template <class T>
void AxonnSplit::linear_out_backward_input(const LinearInputCall<T>& c) const {
  linear3d_backward_input<T>(out_linear(), c.precision, c.dx, c.dy, shard_of(c.w), transfers_of(c.transfers));
}
template <class T, class X>
void AxonnSplit::linear_backward_weight(const LinearWeightCall<T, X>& c) const {
  // the depth group's sums: the same for an in and an out linear
  if constexpr (std::is_same_v<X, T>)
    linear3d_backward_weight<T>(in_linear(), c.precision, V1<T>(c.dw.data(), c.dw.size()), c.db, c.dy, c.x,
                                transfers_of(c.transfers));
  else
    bf16_operand_in_3d("linear_backward_weight");
}

template <class T>
void AxonnSplit::embedding_forward(const EmbeddingCall<T>& c) const {
  // this depth rank's rows from my vocabulary block (width C/X); the Y group sums them
  const int64_t rows = c.out.extent(0);
  const auto mine = Kokkos::subview(c.tokens, std::make_pair(iz * rows, (iz + 1) * rows));
  kernels::embedding_lookup_range<T>(c.out, mine, c.wte, wte_vocab_begin(c.wte.extent(0)));
  if (ny > 1) y->allreduce_sum(V1<T>(c.out.data(), c.out.size()));
  kernels::add_positions<T>(c.out, c.wpe, c.t_len);
}
template <class T>
void AxonnSplit::embedding_backward(const EmbeddingBackwardCall<T>& c) const {
  // every depth rank's rows (the 2D pattern over the depth group): each rank of it then
  // makes the whole gradient of its vocabulary block and of wte's and wpe's columns
  ensure_scratch(c.scratch, int64_t(c.tokens.extent(0)), int64_t(c.dout.extent(1)));
  z->allgather<T>(V1<const T>(c.dout.data(), c.dout.size()), V1<T>(c.scratch.data(), c.scratch.size()));
  kernels::embedding_backward_range<T>(c.dwte, c.dwpe, c.scratch, c.tokens, wte_vocab_begin(c.dwte.extent(0)), c.t_len);
}

template <class T>
void AxonnSplit::head_logits(const HeadLogitsCall<T>& c) const {
  kernels::product<T>(c.precision, "N", "T", c.x, c.wte, T(0), c.logits);
  if (nx > 1) x->allreduce_sum(V1<T>(c.logits.data(), c.logits.size()));  // partial sums over my columns of C
}
template <class T>
void AxonnSplit::head_backward_input(const HeadInputCall<T>& c) const {
  kernels::product<T>(c.precision, "N", "N", c.dlogits, c.wte, T(0), c.dx);
  if (ny > 1) y->allreduce_sum(V1<T>(c.dx.data(), c.dx.size()));
}
template <class T>
void AxonnSplit::head_backward_weight(const HeadWeightCall<T>& c) const {
  if (nz == 1) return kernels::product<T>(c.precision, "T", "N", c.dlogits, c.x, T(1), c.dwte);
  // this depth rank's rows, summed over the depth group
  Tensor2<T> step(Kokkos::view_alloc(Kokkos::WithoutInitializing, "head.dwte"), c.dwte.extent(0), c.dwte.extent(1));
  kernels::product<T>(c.precision, "T", "N", c.dlogits, c.x, T(0), V2<T>(step));
  z->allreduce_sum(V1<T>(step.data(), step.size()));
  kernels::residual_accumulate<T>(V1<T>(c.dwte.data(), c.dwte.size()), V1<const T>(step.data(), step.size()));
}

STRATA_TENSOR_SPLIT_INSTANTIATE(AxonnSplit)

// tp3d_linear.cpp for a linear whose input is split over `in_group` (of `in_ranks`) and
// output over `out_group`, local widths in -> out_w: the weight block gathered over depth
// (its shard: in / depth rows); forward: the output summed over the input's group;
// backward: the block gathered again, the input gradient summed over the output's group,
// the block's gradient reduce-scattered and the bias' summed over depth.
void AxonnSplit::linear_forward_traffic(Traffic& out, const char* in_group, int in_ranks, int64_t rows, int64_t in,
                                        int64_t out_w, int64_t e) const {
  const int64_t shard = in / nz * out_w * e;
  if (nz > 1) out.add(kDepth, "allgather", Collective::AllGather, nz, shard);
  if (in_ranks > 1) out.add(in_group, "allreduce", Collective::AllReduce, in_ranks, rows * out_w * e);
}
void AxonnSplit::linear_backward_traffic(Traffic& out, const char* out_group, int out_ranks, int64_t rows, int64_t in,
                                         int64_t out_w, int64_t e) const {
  const int64_t shard = in / nz * out_w * e;
  if (nz > 1) out.add(kDepth, "allgather", Collective::AllGather, nz, shard);
  if (out_ranks > 1) out.add(out_group, "allreduce", Collective::AllReduce, out_ranks, rows * in * e);
  if (nz > 1) {
    out.add(kDepth, "reduce_scatter", Collective::ReduceScatter, nz, shard);
    out.add(kDepth, "allreduce", Collective::AllReduce, nz, out_w * e);  // the bias
  }
}

void AxonnSplit::gather_rows_traffic(Traffic&, int64_t, int64_t, int64_t) const {}  // (rows not split)
void AxonnSplit::loss_sum_traffic(Traffic& out) const {
  if (nz > 1) out.add(kDepth, "allreduce_scalar", Collective::AllReduce, nz, sizeof(double));
}
void AxonnSplit::layernorm_forward_traffic(Traffic& out, int64_t rows, int64_t e) const {
  if (nx > 1) out.add(kX, "allgather", Collective::AllGather, nx, 2 * rows * e);
}
void AxonnSplit::layernorm_backward_traffic(Traffic& out, int64_t rows, int64_t c_local, int64_t e) const {
  // over X the two sums per token (the 2D layer norm), over depth the gains'
  if (nx > 1) out.add(kX, "allreduce", Collective::AllReduce, nx, 2 * rows * e);
  if (nx > 1 || nz > 1) out.add(kDepth, "allreduce", Collective::AllReduce, nz, 2 * c_local * e);
}
void AxonnSplit::linear_in_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  linear_forward_traffic(out, kX, nx, rows, in, out_w, e);
}
void AxonnSplit::linear_in_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  linear_backward_traffic(out, kY, ny, rows, in, out_w, e);
}
void AxonnSplit::linear_out_forward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  linear_forward_traffic(out, kY, ny, rows, in, out_w, e);
}
void AxonnSplit::linear_out_backward_traffic(Traffic& out, int64_t rows, int64_t in, int64_t out_w, int64_t e) const {
  linear_backward_traffic(out, kX, nx, rows, in, out_w, e);
}
void AxonnSplit::embedding_forward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const {
  if (ny > 1) out.add(kY, "allreduce", Collective::AllReduce, ny, rows * c * e);
}
void AxonnSplit::embedding_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t e) const {
  out.add(kDepth, "allgather", Collective::AllGather, nz, rows * c * e);  // even at depth 1
}
void AxonnSplit::head_logits_traffic(Traffic& out, int64_t rows, int64_t, int64_t v, int64_t e) const {
  if (nx > 1) out.add(kX, "allreduce", Collective::AllReduce, nx, rows * v * e);
}
void AxonnSplit::head_backward_traffic(Traffic& out, int64_t rows, int64_t c, int64_t v, int64_t e) const {
  // dx summed over Y; dwte's rows of this depth rank summed over depth
  if (ny > 1) out.add(kY, "allreduce", Collective::AllReduce, ny, rows * c * e);
  if (nz > 1) out.add(kDepth, "allreduce", Collective::AllReduce, nz, v * c * e);
}
void AxonnSplit::cross_entropy_forward_traffic(Traffic& out, int64_t rows, int64_t e) const {
  out.add(kY, "allreduce_max", Collective::AllReduce, ny, rows * e);  // row maxima
  out.add(kY, "allreduce", Collective::AllReduce, ny, 2 * rows * e);  // sum of exp, target logit
}

}  // namespace strata
