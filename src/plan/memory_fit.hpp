#pragma once
// Refuses, before anything is allocated, a deck whose model cannot be held: sizes whose
// products would overflow the engine's 64-bit counts, and (GPT) a per-rank need, as the
// planner predicts it (predict_memory), beyond the memory the rank can have.
#include <cstdint>

#include "core/deck.hpp"

namespace strata {

// capacity_bytes: what the ranks sharing it may use together (a node's physical memory,
// or one GPU's); sharers: how many ranks share it. Throws UserError with the figures.
void check_fits_in_memory(const Deck& deck, int64_t capacity_bytes, int sharers);

}  // namespace strata
