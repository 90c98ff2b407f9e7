#include "kernels/gemm_probe.hpp"

#include <algorithm>

#include "core/log.hpp"
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

double gemm_rate_at(const std::vector<std::array<int64_t, 3>>& shapes, Precision precision, double seconds_each,
                    int64_t most_calls, std::vector<std::pair<std::string, double>>* each) {
  double flops = 0, seconds = 0;
  for (const auto& [r, k, n] : shapes) {
    const double gf = measure_gemm_gflops(r, k, n, seconds_each, precision, most_calls);
    const double f = 2.0 * double(r) * double(k) * double(n);
    flops += f;
    seconds += f / (gf * 1e9);
    if (each)
      each->emplace_back(strfmt("%lld x %lld x %lld%s", (long long)r, (long long)k, (long long)n,
                                precision == Precision::BF16 ? " bf16" : ""),
                         gf);
  }
  return flops / seconds;
}

}  // namespace strata
