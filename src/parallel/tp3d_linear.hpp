#pragma once
// The 3D linear layer of AxoNN's 4D hybrid (Singh et al., arXiv 2305.13525): Y = X W + b
// with W (k, n) split over two tensor groups and sharded over a third.
//   in    : the ranks that split W's rows, the input features (k / in.size() each);
//   out   : the ranks that split W's columns, the output features (n / out.size() each);
//   depth : the ranks whose activations hold different rows (batch shares), and over
//           which each (in, out) block of W is sharded by rows: the depth rank keeps rows
//           [depth.rank() k/(in depth), ...) of the block, a hyperslab of the global W
//           (rows in.rank() * depth.size() + depth.rank() of k cut in x depth ways,
//           columns out.rank() of n cut out ways), so checkpoints hold global tensors as
//           for every other split. AxoNN shards the flattened block instead; its parts
//           are these rows whenever depth divides the block's rows, which is required.
// A block's consecutive linears swap the two groups: an "in" linear (qkv, fc) splits its
// input over X and its output over Y, an "out" linear (proj, fc_proj) its input over Y and
// its output over X, so the activation between them needs no re-layout.
// Forward: the block all-gathered over depth (in flight under the previous linear's
// product: parallel/tp3d_transfers.hpp), multiplied, the output's partial sums
// all-reduced over `in`. Backward: the input gradient's partial sums all-reduced over
// `out`; the block's gradient (this depth rank's rows) reduce-scattered over depth into
// the shard; the bias (n/out values, replicated over in and depth) summed over depth.
#include "comm/comm.hpp"
#include "core/tensor.hpp"
#include "kernels/products.hpp"
#include "parallel/tp3d_transfers.hpp"

namespace strata {

// Values of the weight shard one rank keeps: k / (in depth) x n / out. A
// std::invalid_argument when in x depth does not divide k or out does not divide n.
int64_t linear3d_shard_size(const Linear3DGroups& g, int64_t k, int64_t n);

// This rank's shard of the global row-major W (k, n): its (in, out) block, part
// depth.rank() of it. Host vectors (initialisation, checkpoints, tests).
template <class T>
std::vector<T> linear3d_shard_of(const Linear3DGroups& g, const std::vector<T>& w, int64_t k, int64_t n);

// y (r, n/out) = x (r, k/in) W_block + bias (n/out). The block comes from `transfers`
// (prefetched by the caller, or gathered here).
template <class T>
void linear3d_forward(const Linear3DGroups& g, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                      V1<const T> w_shard, V1<const T> bias, Linear3DTransfers<T>& transfers);

// dx (r, k/in) = dy (r, n/out) W_block^T summed over `out` (left in flight where
// transfers.input_sums_in_flight is on: complete it with transfers.input_sum()). The block
// is gathered again (the forward's copy is not kept).
template <class T>
void linear3d_backward_input(const Linear3DGroups& g, kernels::ProductPrecision precision, V2<T> dx, V2<const T> dy,
                             V1<const T> w_shard, Linear3DTransfers<T>& transfers);

// dw_shard += this rank's shard of sum over depth of x^T dy (with overlap, once the
// reduce-scatter completes: by transfers.finish() at the latest); dbias += the column
// sums of dy over every depth rank's rows.
template <class T>
void linear3d_backward_weight(const Linear3DGroups& g, kernels::ProductPrecision precision, V1<T> dw_shard, V1<T> dbias,
                              V2<const T> dy, V2<const T> x, Linear3DTransfers<T>& transfers);

}  // namespace strata
