#pragma once
// A mixture of experts' routing, summed over forwards (for the progress line and tests):
// assignments per expert of the global micro-batches, and those the capacity dropped.
#include <cstdint>
#include <vector>

namespace strata {

struct ExpertLoad {
  std::vector<int64_t> assigned;
  int64_t dropped = 0;
};

}  // namespace strata
