#pragma once
// What a block needs to know about the micro-batch it runs on. A driver (data parallel,
// a pipeline stage) fills it; blocks never know which driver runs them.
#include <cstdint>

namespace strata {

struct BlockContext {
  int64_t batch = 1;    // B: sequences in this micro-batch (on this rank)
  int64_t seq_len = 1;  // T
  int64_t rows() const { return batch * seq_len; }
};

}  // namespace strata
