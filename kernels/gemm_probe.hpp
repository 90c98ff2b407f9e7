#pragma once
// Measures this rank's matrix-product rate at a model's shapes, in fp32 or with bf16
// operands (model.precision), so the progress line can say what fraction of the machine's
// attainable rate training reaches, and calibrate can tell the planner both rates.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/deck_choices.hpp"

namespace strata {

// Best GFLOP/s of (m x k) @ (k x n) over repeated calls lasting about `seconds`, or over
// `most_calls` calls after the warm-up where those end sooner (small shapes: a run's
// progress probe of a tiny model took 0.3 s of every short job for nothing).
double measure_gemm_gflops(int64_t m, int64_t k, int64_t n, double seconds = 0.3, Precision precision = Precision::FP32,
                           int64_t most_calls = INT64_MAX);

// The rate of a pass of the products of `shapes` ((m, k, n) each), in FLOP/s: each shape
// measured (measure_gemm_gflops) and the rates weighted by their FLOPs. Each shape's
// GFLOP/s goes into `each` if given, named "m x k x n" (" bf16").
double gemm_rate_at(const std::vector<std::array<int64_t, 3>>& shapes, Precision precision, double seconds_each,
                    int64_t most_calls = INT64_MAX, std::vector<std::pair<std::string, double>>* each = nullptr);

}  // namespace strata
