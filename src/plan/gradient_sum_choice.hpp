#pragma once
// `strata plan` on a machine of 2 or more nodes: where the recommended layout's data
// replicas sum across nodes, the step predicted with each way of summing them (flat; node
// by node; node by node with int8 codes or PowerSGD factors across: parallel.grad_sum,
// grad_compression, the deck's powersgd_rank), the codecs' own time at the machine file's
// rates (int8_rate, powersgd_rate), and which pays.
#include <ostream>

#include "plan/machine_file.hpp"
#include "plan/step_prediction.hpp"

namespace strata {

// Prints nothing where the replicas do not cross nodes, or the sum node by node does not
// run with the layout (ZeRO, MGRIT, NCCL, replicas split unevenly over the nodes).
void print_gradient_sum_choice(const Deck& deck, const StepPrediction& recommended, const MachineFile& machine,
                               std::ostream& out);

}  // namespace strata
