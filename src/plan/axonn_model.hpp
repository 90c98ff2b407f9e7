#pragma once
// The communication model of AxoNN's 3D split (Singh et al., arXiv 2305.13525, its
// performance model): the collectives of a transformer block's four linears in closed
// form. The engine's 3D linears declare the same traffic call for call (tests/plan/
// test_axonn_model.cpp), and the step prediction times those declarations; the closed
// form ranks a tensor size's splits only where no machine file times them
// (ranked_3d_splits, plan/layout.hpp). The paper ranks splits by this model alone; strata
// by its whole step prediction, since ranked by the transfers alone the planner lost the
// fastest split of some decks (docs/planner.md).
#include <vector>

#include "comm/traffic.hpp"

namespace strata {

// One block's linears, forward and backward, on one rank of an X x Y x depth split:
// c = the model width C, rows = the block's rows on this rank (its depth share), e = bytes
// per value. Per linear W (k, n) with input over `in` and output over `out` (qkv and fc:
// X, Y; proj and fc_proj: Y, X): the block (k/in, n/out) gathered over depth twice, its
// gradient reduce-scattered once (payload: the shard, k n / (in out depth)); the output's
// partial sums all-reduced over `in` (rows x n/out), the input gradient's over `out`
// (rows x k/in); the bias' gradient (n/out) summed over depth.
Traffic axonn_block_traffic(int64_t c, int64_t rows, int tx, int ty, int tz, int64_t e);

}  // namespace strata
