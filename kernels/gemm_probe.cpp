#include "kernels/gemm_probe.hpp"

#include <algorithm>

#include "core/timers.hpp"
#include "kernels/products.hpp"

namespace strata {

double measure_gemm_gflops(int64_t m, int64_t k, int64_t n, double seconds, Precision precision, int64_t most_calls) {
  Tensor2<float> a("probe.a", m, k), b("probe.b", k, n), c("probe.c", m, n);
  Kokkos::deep_copy(a, 0.5f);
  Kokkos::deep_copy(b, 0.25f);
  kernels::ProductWorkspace workspace;  // the probe's own (primitives, rounded operands)
  const kernels::ProductPrecision products(precision, true, &workspace);
  kernels::product<float>(products, "N", "N", a, b, 0.0f, c);  // warm-up (BLAS buffers, page faults)
  Kokkos::fence();
  double best = 0;
  const double t_end = Timers::now() + seconds;
  int64_t calls = 0;
  do {
    const double t0 = Timers::now();
    kernels::product<float>(products, "N", "N", a, b, 0.0f, c);
    Kokkos::fence();
    const double dt = Timers::now() - t0;
    best = std::max(best, 2.0 * double(m) * double(k) * double(n) / dt / 1e9);
  } while (++calls < most_calls && Timers::now() < t_end);
  return best;
}

}  // namespace strata
