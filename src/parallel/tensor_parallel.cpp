#include "parallel/tensor_parallel.hpp"

namespace strata {

// The one place a split is made from the deck's parallel.tensor_mode.
TensorParallel tensor_split_of(const Layout& p) {
  switch (p.tensor_split()) {
    case TensorMode::Serial:
      return WholeTensors{};
    case TensorMode::OneD:
      return ColumnSplit{nullptr, int(p.tensor_cols), 0, p.sequence_parallel};
    case TensorMode::TwoD:
      return OptimusSplit{nullptr, nullptr, nullptr, int(p.tensor_rows), 0, 0};
    case TensorMode::ThreeD:
      return AxonnSplit{
          nullptr, nullptr, nullptr, nullptr,         int(p.tensor_x), int(p.tensor_y), int(p.tensor_depth),
          0,       0,       0,       p.tensor_overlap};
  }
  return WholeTensors{};
}

TensorParallel tensor_parallel_of(const Grid& grid) {
  return tensor_split_of(grid.shape()).visit([&](const auto& s) -> TensorParallel::Split { return s.placed_on(grid); });
}

}  // namespace strata
