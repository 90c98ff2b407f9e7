#pragma once
// ZeRO-2/3's finer units (GPT::fine_units): a layer whose parameters are several units, a
// block's linears or the tied embedding's vocabulary chunks, says where one unit's use
// starts and when one unit's gradients are final, so a rank holds one or two such units at
// a time rather than the layer's whole parameters and gradients. The model that owns the
// layer maps them to its steps (ZeroState::use_params) and to its gradient-ready calls.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace strata {

struct UnitHooks {
  std::function<void()> step;     // before the layer reads its next unit's parameters (in the order it names them)
  std::function<void(int)> done;  // the layer's unit k has its final gradients (the backward)
  int64_t chunk_rows = 0;         // the tied embedding's: the rows of a vocabulary chunk (the last may be fewer)
};

// The vocabulary chunks of `rows` local rows of wte: [first, second) of each, in order.
inline std::vector<std::pair<int64_t, int64_t>> vocab_chunks(int64_t rows, int64_t chunk_rows) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t r = 0; r < rows; r += chunk_rows) out.emplace_back(r, std::min(rows, r + chunk_rows));
  return out;
}

}  // namespace strata
