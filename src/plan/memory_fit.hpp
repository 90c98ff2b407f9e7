#pragma once
// Refuses, before anything is allocated, a deck whose model cannot be held: sizes whose
// products would overflow the engine's 64-bit counts, and (GPT) a per-rank need, as the
// planner predicts it (predict_memory) for the layout the deck runs (deck.parallel: every
// split, the schedule, ZeRO, recomputation, MGRIT), beyond the memory the rank can have.
#include <cstdint>
#include <string>

#include "core/deck.hpp"

namespace strata {

// What a rank may use: `node_bytes` shared by `sharers` ranks (a node's physical memory,
// or its memory cgroup's limit, or one GPU's), and at most `rank_bytes` of its own (a
// per-process limit, 0: none), named by `rank_limit` in the message.
struct MemoryCapacity {
  int64_t node_bytes = 0;  // 0: unknown, not checked
  int sharers = 1;
  std::string node_source = "the node";  // "the node", "GPU", "the memory cgroup /PATH"
  int64_t rank_bytes = 0;
  std::string rank_source;  // "ulimit -d", "ulimit -v"
};

// Throws UserError, one line with the figures, where the deck does not fit.
void check_fits_in_memory(const Deck& deck, const MemoryCapacity& capacity);

}  // namespace strata
