#include "parallel/summa.hpp"

#include <array>

#include "kernels/gemm.hpp"
#include "kernels/products.hpp"

namespace strata {
namespace {

// A block-sized buffer on the device with its host mirror (the same memory on CPUs).
template <class T>
struct Staged {
  Tensor2<T> dev;
  typename Tensor2<T>::HostMirror host;
  Staged(int64_t r, int64_t c)
      : dev(Kokkos::view_alloc(Kokkos::WithoutInitializing, "summa.buf"), r, c), host(Kokkos::create_mirror_view(dev)) {
  }
  void to_host() { Kokkos::deep_copy(host, dev); }  // no-op when host == dev
  void to_device() { Kokkos::deep_copy(dev, host); }
};

template <class T>
void copy_block(Staged<T>& dst, V2<const T> src) {
  Kokkos::deep_copy(dst.dev, src);
  dst.to_host();
}

}  // namespace

template <class T>
void summa_matmul_ab(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> c, V2<const T> a,
                     V2<const T> b) {
  const int64_t m = a.extent(0), k = a.extent(1), n = b.extent(1);
  if (g.q == 1) {
    kernels::product<T>(precision, "N", "N", a, b, T(0), c);
    return;
  }
  std::array<Staged<T>, 2> abuf{Staged<T>(m, k), Staged<T>(m, k)}, bbuf{Staged<T>(k, n), Staged<T>(k, n)};
  std::array<Comm::Request, 2> ra{}, rb{};
  const auto post = [&](int t) {
    auto &sa = abuf[t % 2], &sb = bbuf[t % 2];
    if (g.j == t) copy_block(sa, a);  // A_it lives on (i, t): broadcast along row i
    if (g.i == t) copy_block(sb, b);  // B_tj lives on (t, j): broadcast along column j
    ra[t % 2] = g.row.start_broadcast(sa.host.data(), m * k, t);
    rb[t % 2] = g.col.start_broadcast(sb.host.data(), k * n, t);
  };
  post(0);
  for (int t = 0; t < g.q; ++t) {
    if (t + 1 < g.q) post(t + 1);  // the next step's blocks travel while this one multiplies
    g.row.wait(ra[t % 2], "broadcast");
    g.col.wait(rb[t % 2], "broadcast");
    abuf[t % 2].to_device();
    bbuf[t % 2].to_device();
    kernels::product<T>(precision, "N", "N", abuf[t % 2].dev, bbuf[t % 2].dev, t == 0 ? T(0) : T(1), c);
  }
}

namespace {

// The shared shape of ABT and ATB: per step t, broadcast one operand's block over `bcast`
// (root t), multiply it with the local block of the other operand into a partial product,
// and sum the partials over `reduce` into the rank at position t, whose C block it is.
// `multiply(bcast_block, partial)` computes the partial product.
template <class T, class Multiply>
void summa_reduce_products(int q, int my_position_in_bcast, Comm& bcast, Comm& reduce, V2<const T> local_bcast_block,
                           V2<T> c, Multiply multiply) {
  const int64_t br = local_bcast_block.extent(0), bc = local_bcast_block.extent(1);
  const int64_t m = c.extent(0), n = c.extent(1);
  std::array<Staged<T>, 2> bbuf{Staged<T>(br, bc), Staged<T>(br, bc)}, partial{Staged<T>(m, n), Staged<T>(m, n)};
  Staged<T> result(m, n);
  std::array<Comm::Request, 2> rb{}, rr{};
  const auto post = [&](int t) {
    if (my_position_in_bcast == t) copy_block(bbuf[t % 2], local_bcast_block);
    rb[t % 2] = bcast.start_broadcast(bbuf[t % 2].host.data(), br * bc, t);
  };
  post(0);
  for (int t = 0; t < q; ++t) {
    if (t + 1 < q) post(t + 1);
    bcast.wait(rb[t % 2], "broadcast");
    bbuf[t % 2].to_device();
    if (rr[t % 2].pending()) reduce.wait(rr[t % 2], "reduce");  // partial buffer free again
    multiply(V2<const T>(bbuf[t % 2].dev), V2<T>(partial[t % 2].dev));
    partial[t % 2].to_host();
    // the sum of step t's partials belongs to position t of the reducing group
    rr[t % 2] = reduce.start_reduce_sum(partial[t % 2].host.data(), result.host.data(), m * n, t);
  }
  for (auto& r : rr)
    if (r.pending()) reduce.wait(r, "reduce");
  result.to_device();
  Kokkos::deep_copy(c, result.dev);
}

}  // namespace

template <class T>
void summa_matmul_abt(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> c, V2<const T> a,
                      V2<const T> b) {
  if (g.q == 1) {
    kernels::product<T>(precision, "N", "T", a, b, T(0), c);
    return;
  }
  // step t: B_tj down column j; P = A_ij B_tj^T; sum P over row i into (i, t) = C_it
  summa_reduce_products(g.q, g.i, g.col, g.row, b, c,
                        [&](V2<const T> bt, V2<T> p) { kernels::product<T>(precision, "N", "T", a, bt, T(0), p); });
}

template <class T>
void summa_matmul_atb(const TensorGrid2D& g, kernels::ProductPrecision precision, V2<T> c, V2<const T> a,
                      V2<const T> b) {
  if (g.q == 1) {
    kernels::product<T>(precision, "T", "N", a, b, T(0), c);
    return;
  }
  // step t: A_it along row i; P = A_it^T B_ij; sum P over column j into (t, j) = C_tj
  summa_reduce_products(g.q, g.j, g.row, g.col, a, c,
                        [&](V2<const T> at, V2<T> p) { kernels::product<T>(precision, "T", "N", at, b, T(0), p); });
}

#define STRATA_SUMMA_INSTANTIATE(T)                                                                                   \
  template void summa_matmul_ab<T>(const TensorGrid2D&, kernels::ProductPrecision, V2<T>, V2<const T>, V2<const T>);  \
  template void summa_matmul_abt<T>(const TensorGrid2D&, kernels::ProductPrecision, V2<T>, V2<const T>, V2<const T>); \
  template void summa_matmul_atb<T>(const TensorGrid2D&, kernels::ProductPrecision, V2<T>, V2<const T>, V2<const T>);
STRATA_SUMMA_INSTANTIATE(float)
STRATA_SUMMA_INSTANTIATE(double)
#undef STRATA_SUMMA_INSTANTIATE

}  // namespace strata
