#pragma once
// The communication model of AxoNN's 3D split (Singh et al., arXiv 2305.13525, its
// performance model): the collectives of a transformer block's four linears in closed
// form, each timed as a ring over the links its group crosses (plan/links.hpp), with the
// depth group's weight gathers and gradient reduce-scatters hidden under the linears'
// products where the run overlaps them (parallel.tensor_overlap). As the paper uses its
// model, the planner ranks the X x Y x depth splits of a tensor size by it and keeps the
// best few for its exact prediction (plan/step_prediction.hpp, from the traffic the
// engine declares); the layer norms, embedding and head, which the model leaves out, are
// small beside the linears.
#include <vector>

#include "comm/traffic.hpp"
#include "core/deck.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"

namespace strata {

// One block's linears, forward and backward, on one rank of an X x Y x depth split:
// c = the model width C, rows = the block's rows on this rank (its depth share), e = bytes
// per value. Per linear W (k, n) with input over `in` and output over `out` (qkv and fc:
// X, Y; proj and fc_proj: Y, X): the block (k/in, n/out) gathered over depth twice, its
// gradient reduce-scattered once (payload: the shard, k n / (in out depth)); the output's
// partial sums all-reduced over `in` (rows x n/out), the input gradient's over `out`
// (rows x k/in); the bias' gradient (n/out) summed over depth.
Traffic axonn_block_traffic(int64_t c, int64_t rows, int tx, int ty, int tz, int64_t e);

struct Axonn3DCost {
  double wire_bytes = 0;  // per step, what a rank sends
  double seconds = 0;     // per step, every transfer
  double exposed = 0;     // per step, what the products do not hide
};
// The model for layout l (3D) on machine m: every block of a stage, every micro-batch.
Axonn3DCost axonn_step_cost(const Deck& deck, const Layout& l, const MachineFile& m);

// The `keep` best X x Y x depth splits of `size` tensor ranks (size dividing ranks; the
// rest of the ranks data-parallel) that the deck's widths allow: by exposed seconds on m,
// or, without a machine, by wire bytes.
std::vector<Layout> best_3d_splits(const Deck& deck, int ranks, int size, int keep, const MachineFile* m);

}  // namespace strata
