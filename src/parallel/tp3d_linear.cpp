#include "parallel/tp3d_linear.hpp"

#include <stdexcept>
#include <string>

#include "kernels/column_sums.hpp"
#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace strata {

int64_t linear3d_shard_size(const Linear3DGroups& g, int64_t k, int64_t n) {
  const int64_t in = g.in.size(), out = g.out.size(), depth = g.depth.size();
  if (k % (in * depth) != 0 || n % out != 0)
    throw std::invalid_argument("linear3d: a (" + std::to_string(k) + ", " + std::to_string(n) +
                                ") weight does not split over in " + std::to_string(in) + " x depth " +
                                std::to_string(depth) + " rows and out " + std::to_string(out) + " columns");
  return k / (in * depth) * (n / out);
}

template <class T>
std::vector<T> linear3d_shard_of(const Linear3DGroups& g, const std::vector<T>& w, int64_t k, int64_t n) {
  const int64_t size = linear3d_shard_size(g, k, n), rows = k / (g.in.size() * g.depth.size()), cols = n / g.out.size();
  const int64_t r0 = (int64_t(g.in.rank()) * g.depth.size() + g.depth.rank()) * rows, c0 = g.out.rank() * cols;
  std::vector<T> shard(static_cast<size_t>(size));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) shard[size_t(r * cols + c)] = w[size_t((r0 + r) * n + c0 + c)];
  return shard;
}

template <class T>
void linear3d_forward(const Linear3DGroups& g, kernels::ProductPrecision precision, V2<T> y, V2<const T> x,
                      V1<const T> w_shard, V1<const T> bias, Linear3DTransfers<T>& transfers) {
  const auto w = transfers.block(g, w_shard, x.extent(1), y.extent(1));
  transfers.product(g, "3d x W", precision, "N", "N", x, w, y);
  if (g.in.size() > 1) g.in.allreduce_sum(V1<T>(y.data(), y.size()));
  if (bias.extent(0) > 0) kernels::add_bias<T>(y, bias);
}

template <class T>
void linear3d_backward_input(const Linear3DGroups& g, kernels::ProductPrecision precision, V2<T> dx, V2<const T> dy,
                             V1<const T> w_shard, Linear3DTransfers<T>& transfers) {
  const auto w = transfers.block(g, w_shard, dx.extent(1), dy.extent(1));
  transfers.product(g, "3d dy W^T", precision, "N", "T", dy, w, dx);
  if (g.out.size() == 1) return;
  if (transfers.input_sums_later(g))
    transfers.sum_later(g.out, dx);
  else
    g.out.allreduce_sum(V1<T>(dx.data(), dx.size()));
}

template <class T>
void linear3d_backward_weight(const Linear3DGroups& g, kernels::ProductPrecision precision, V1<T> dw_shard, V1<T> dbias,
                              V2<const T> dy, V2<const T> x, Linear3DTransfers<T>& transfers) {
  const int64_t bk = x.extent(1), bn = dy.extent(1);
  const V2<T> block = transfers.gradient_slot(bk, bn);
  transfers.product(g, "3d x^T dy", precision, "T", "N", x, dy, block);
  transfers.reduce_scatter(g, dw_shard);
  if (dbias.extent(0) == 0) return;
  Tensor1<T> sums("linear3d.dbias", bn);
  kernels::add_column_sums<T>(V1<T>(sums), dy);
  if (g.depth.size() > 1) g.depth.allreduce_sum(V1<T>(sums));
  kernels::residual_accumulate<T>(dbias, V1<const T>(sums));
}

#define STRATA_LINEAR3D(T)                                                                                             \
  template std::vector<T> linear3d_shard_of<T>(const Linear3DGroups&, const std::vector<T>&, int64_t, int64_t);        \
  template void linear3d_forward<T>(const Linear3DGroups&, kernels::ProductPrecision, V2<T>, V2<const T>, V1<const T>, \
                                    V1<const T>, Linear3DTransfers<T>&);                                               \
  template void linear3d_backward_input<T>(const Linear3DGroups&, kernels::ProductPrecision, V2<T>, V2<const T>,       \
                                           V1<const T>, Linear3DTransfers<T>&);                                        \
  template void linear3d_backward_weight<T>(const Linear3DGroups&, kernels::ProductPrecision, V1<T>, V1<T>,            \
                                            V2<const T>, V2<const T>, Linear3DTransfers<T>&);
STRATA_LINEAR3D(float)
STRATA_LINEAR3D(double)
#undef STRATA_LINEAR3D

}  // namespace strata
