#pragma once
// What a tensor split (parallel/tensor_parallel.hpp) says about itself as data: the
// figures the blocks size their buffers by and the planner reads, without a switch on
// which split it is.
#include <cstdint>

namespace strata {

class Comm;

// A group of the split that a caller gathers over, and the name its traffic is counted
// under (the trainer's: "tensor", "tensor_x", ...).
struct SplitGroup {
  Comm* comm = nullptr;
  int size = 1;
  const char* name = "";
};

// A block of the replica's batch: this rank holds block `index` of `parts`.
struct BatchBlock {
  int parts = 1, index = 0;
};

// How a mixture of experts splits each expert's hidden units over the tensor group: in
// `parts` parts, this rank's `part`; `columns` of them share a row of the residual
// stream (3D: X, whose ranks hold its columns).
struct ExpertParts {
  int parts = 1, part = 0, columns = 1;
};

struct SplitTraits {
  int size = 1;                               // ranks in the split
  int row_split = 1;                          // ways the residual stream's rows are split (sequence parallelism)
  int residual_parts = 1;                     // ways its hidden width is split
  bool whole_activations = true;              // every rank holds every row and column a block reads
  int expert_ways = 1;                        // ranks of the split that route rows to the experts
  BatchBlock batch;                           // the replica's batch block this rank holds
  bool multiplies_moved_blocks = false;       // the linears multiply blocks sent to them (both operands rounded)
  bool gathers_weight_blocks = false;         // the linears gather their weight blocks (a workspace for one)
  bool bf16_dlogits = true;                   // the head's products can read the logits' gradient kept as bf16 only
  bool head_multiplies_moved_blocks = false;  // the head's products multiply blocks sent to them
  ExpertParts experts;
};

}  // namespace strata
