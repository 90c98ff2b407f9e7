#pragma once
// A layer norm's backward where this rank sees only some of the rows the gains apply to
// (1D under sequence parallelism, 3D over depth): the gain's and bias' gradients of its
// rows are summed over the ranks that hold the others (`over`; none: this rank's alone),
// then added (dw, db accumulate over micro-batches, which must not be summed again).
#include "comm/comm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/residual.hpp"
#include "parallel/splits/split_calls.hpp"

namespace strata {

template <class T>
void layernorm_backward_gains_summed(const LayerNormBackwardCall<T>& c, Comm* over) {
  const int64_t n = c.dw.extent(0);
  Tensor1<T> wb("layernorm.dwb", 2 * n);
  kernels::layernorm_backward<T>(c.dx, V1<T>(wb.data(), n), V1<T>(wb.data() + n, n), c.dy, c.x, c.w, c.mean, c.rstd,
                                 c.accumulate);
  if (over) over->allreduce_sum(V1<T>(wb));
  kernels::residual_accumulate<T>(c.dw, V1<const T>(wb.data(), n));
  kernels::residual_accumulate<T>(c.db, V1<const T>(wb.data() + n, n));
}

}  // namespace strata
