#pragma once
// Measures this rank's single-precision GEMM rate at a model's shapes, so the progress
// line can say what fraction of the machine's attainable rate training reaches.
#include <cstdint>

namespace strata {

// Best GFLOP/s of (m x k) @ (k x n) over repeated calls lasting about `seconds`.
double measure_gemm_gflops(int64_t m, int64_t k, int64_t n, double seconds = 0.3);

}  // namespace strata
