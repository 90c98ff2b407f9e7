#pragma once
// How far layer-parallel training's inexact gradient is from the exact one (the bias the
// gradient control watches, layer_parallel.hpp): the relative error |g - g_exact| /
// |g_exact| and the cosine of the angle between them, over the whole model's gradient,
// each value counted once (by its replica 0, as the clipping norm counts it,
// optim/grad_clip.hpp) and summed over the model group (and with ZeRO-1 the data group
// whose blocks make up the gradient).
#include <cmath>
#include <limits>

#include "comm/comm.hpp"
#include "state/param_store.hpp"

namespace strata {

struct GradientCheck {
  double error = std::numeric_limits<double>::quiet_NaN();
  double cosine = std::numeric_limits<double>::quiet_NaN();
};

// inexact: a copy of the flat gradients (ParamStore::grads()) from before the exact ones
// were made in the store.
template <class T>
GradientCheck compare_gradients(const ParamStore<T>& store, V1<const T> inexact, Comm& model, Comm* zero) {
  const V1<const T> exact = store.grads_view();
  double sums[4] = {0, 0, 0, 0};  // g.g, e.e, g.e, (g - e).(g - e) over the values this rank owns
  for (const auto& p : store.infos()) {
    if (p.replica != 0) continue;
    for (const auto& part : store.zero().moment_parts(p)) {
      double gg = 0, ee = 0, ge = 0, dd = 0;
      Kokkos::parallel_reduce(
          "gradient_check", Range(part.begin, part.end),
          KOKKOS_LAMBDA(const int64_t i, double& a, double& b, double& c, double& d) {
            const double g = double(inexact(i)), e = double(exact(i));
            a += g * g;
            b += e * e;
            c += g * e;
            d += (g - e) * (g - e);
          },
          gg, ee, ge, dd);
      sums[0] += gg, sums[1] += ee, sums[2] += ge, sums[3] += dd;
    }
  }
  for (double& s : sums) {
    if (zero) s = zero->allreduce_sum(s);
    s = model.allreduce_sum(s);
  }
  GradientCheck c;
  if (sums[1] > 0) c.error = std::sqrt(sums[3] / sums[1]);
  if (sums[0] > 0 && sums[1] > 0) c.cosine = sums[2] / std::sqrt(sums[0] * sums[1]);
  return c;
}

}  // namespace strata
