#pragma once
// `strata plan` on a machine of 2 or more nodes: for a layout whose data replicas sum
// across nodes, the step predicted with each way of summing them (flat; node
// by node; node by node with int8 codes or PowerSGD factors across: parallel.grad_sum,
// grad_compression, the deck's powersgd_rank), the codecs' own time at the machine file's
// rates (int8_rate, powersgd_rate), and which pays.
#include <ostream>
#include <vector>

#include "plan/machine_file.hpp"
#include "plan/step_prediction.hpp"

namespace strata {

// For the recommended layout (ranked[best]) where its replicas cross nodes, else for the
// fastest one that fits whose replicas do; nothing where none does, or the sum node by
// node does not run with it (ZeRO, MGRIT, NCCL, replicas split unevenly over the nodes).
void print_gradient_sum_choice(const Deck& deck, const std::vector<StepPrediction>& ranked, int best,
                               const MachineFile& machine, std::ostream& out);

}  // namespace strata
