#pragma once
// What a tensor split divides, and by how much, as a model kind's deck rules read it
// (the kind checks its own shapes against them: model/gpt_kind.cpp). `why` names the
// deck keys the divisor comes from, as the error message says it.
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct Division {
  int64_t by = 1;
  std::string why;
};

// n_embd x times must be divisible by d
struct WidthDivision {
  int64_t times = 1;
  Division d;
};

struct SplitDivisions {
  Division heads;                    // attention heads (the MLP's hidden units follow them)
  std::string heads_name;            // the heads' divisor as a word ("tensor_cols", "q", ...)
  std::vector<WidthDivision> width;  // the hidden width
  Division vocab;                    // the (padded) vocabulary's rows
  Division batch;                    // a micro-batch's sequences (data.batch_size / data / micro_batches)
  Division routed;                   // a mixture's tokens per batch block: each rank routes a share
  std::string routed_tokens;         // those tokens in words, where a batch block is not the micro-batch
  std::string experts_why;           // why the experts divide over the tensor ranks too ("" where they do not)
  std::string refuses_experts;       // why a mixture of experts does not run under the split ("": it does)
};

}  // namespace strata
