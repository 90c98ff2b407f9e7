#pragma once
// The rows a mixture-of-experts layer sends to its experts' ranks and back (expert
// parallelism, parallel/expert_parallel.hpp): the counts first (an all-to-all of each
// expert's rows), then the rows by all-to-alls of counted sizes. The layer decides which
// rows go where (model/moe_layer.hpp); this moves them.
#include <vector>

#include "comm/traffic.hpp"
#include "parallel/expert_parallel.hpp"

namespace strata {

// One forward's exchange, kept for its backward.
struct ExpertCounts {
  std::vector<int64_t> send_rows, recv_rows;  // rows to / from each expert rank
  std::vector<int64_t> expert_rows;           // (E / e) rows of each local expert
  int64_t received = 0;                       // R, their sum
  Tensor1<int32_t> recv_place;                // (R) each received row's place in the local experts' order
};

template <class T>
class ExpertExchange {
 public:
  // experts: E, over ep's ranks; width: a row's values (C)
  ExpertExchange(const ExpertParallel& ep, int64_t experts, int64_t width);
  // From the rows this rank sends each expert (their sum: `dispatched`): what goes to each
  // expert rank, what comes from each, the rows of each local expert, and where each
  // received row lies in the local experts' order.
  void count(const std::vector<int64_t>& per_expert, int64_t dispatched, ExpertCounts& c) const;
  // The rows of dispatch order (S, C) to the local experts' order (R, C), and back.
  void to_experts(V2<const T> rows, V2<T> expert_rows, const ExpertCounts& c) const;
  void from_experts(V2<const T> expert_rows, V2<T> rows, const ExpertCounts& c) const;
  // what one pass sends for `assignments` rows at a balanced routing (the forward also
  // exchanges the counts)
  void traffic(Traffic& out, int64_t assignments, bool forward) const;

 private:
  ExpertParallel ep_;
  int64_t experts_, local_experts_, c_;
  mutable Tensor2<T> recv_;  // kept between calls
};

}  // namespace strata
