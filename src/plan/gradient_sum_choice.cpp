#include "plan/gradient_sum_choice.hpp"

#include <string>
#include <vector>

#include "core/log.hpp"
#include "plan/links.hpp"

namespace strata {

namespace {

struct SumWay {
  GradSum sum;
  GradCompression codec;
  std::string name;
};

bool node_sums_run(const Deck& deck, const Layout& l, const MachineFile& machine) {
  const Links links(l, machine);
  const int per_node = links.replicas_per_node();
  return machine.has_inter_node && l.replicas() > 1 && links.crosses_nodes("data") && l.zero == 0 && !l.mgrit() &&
         deck.parallel.comm_backend == CommBackend::Mpi && per_node > 0 && l.replicas() % per_node == 0;
}

}  // namespace

void print_gradient_sum_choice(const Deck& deck, const StepPrediction& recommended, const MachineFile& machine,
                               std::ostream& out) {
  if (!node_sums_run(deck, recommended.layout, machine)) return;
  const std::string r = std::to_string(deck.parallel.powersgd_rank);
  const std::vector<SumWay> ways = {{GradSum::Flat, GradCompression::None, "flat"},
                                    {GradSum::Nodes, GradCompression::None, "nodes"},
                                    {GradSum::Nodes, GradCompression::Int8, "nodes + int8"},
                                    {GradSum::Nodes, GradCompression::PowerSgd, "nodes + powersgd r=" + r}};
  out << "  gradient sums across nodes (the recommended layout's step with each; codecs at the machine file's "
         "rates):\n";
  std::vector<double> steps;
  size_t fastest = 0;
  std::string unmeasured;
  for (size_t i = 0; i < ways.size(); ++i) {
    Layout l = recommended.layout;
    l.grad_sum = ways[i].sum;
    l.grad_compression = ways[i].codec;
    l.powersgd_rank = deck.parallel.powersgd_rank;
    const double step = predict_step(deck, l, machine).step_s;
    const Links links(l, machine);
    if (ways[i].codec != GradCompression::None && !links.codec_rate_known())
      unmeasured += (unmeasured.empty() ? "" : " and ") + to_string(ways[i].codec);
    steps.push_back(step);
    if (step < steps[fastest]) fastest = i;
    out << strfmt("    %-24s %10.2f ms  %5.2fx the flat sum's speed\n", ways[i].name.c_str(), 1e3 * step,
                  steps[0] / step);
  }
  const SumWay& w = ways[fastest];
  if (w.codec == GradCompression::None) {
    out << "  compression does not pay here: the " << w.name << " sum is the fastest"
        << (fastest == 1 ? " (--set parallel.grad_sum=nodes)" : "") << "\n";
  } else {
    out << strfmt(
               "  compression pays: %s, %.2fx the uncompressed node-by-node sum's speed (--set parallel.grad_sum=nodes "
               "--set parallel.grad_compression=%s",
               w.name.c_str(), steps[1] / steps[fastest], to_string(w.codec).c_str())
        << (w.codec == GradCompression::PowerSgd ? " --set parallel.powersgd_rank=" + r : std::string()) << "); "
        << "it sums approximately, with error feedback: docs/parallelism.md has the losses it gave\n";
  }
  if (!unmeasured.empty())
    out << "  (no rate for " << unmeasured
        << " in the machine file: its own time is left out; strata calibrate "
           "measures it)\n";
}

}  // namespace strata
