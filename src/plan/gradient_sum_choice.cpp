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

// The fastest layout that fits whose replicas sum across nodes: the recommended one, or
// the first such below it (-1: none).
int crossing_layout(const Deck& deck, const std::vector<StepPrediction>& ranked, int best, const MachineFile& machine) {
  if (node_sums_run(deck, ranked[size_t(best)].layout, machine)) return best;
  for (size_t i = 0; i < ranked.size(); ++i)
    if (double(ranked[i].memory_bytes()) <= machine.memory_capacity && node_sums_run(deck, ranked[i].layout, machine))
      return int(i);
  return -1;
}

void print_gradient_sum_choice(const Deck& deck, const std::vector<StepPrediction>& ranked, int best,
                               const MachineFile& machine, std::ostream& out) {
  const int subject = crossing_layout(deck, ranked, best, machine);
  if (subject < 0) return;
  const Layout& base = ranked[size_t(subject)].layout;
  const std::string r = std::to_string(deck.parallel.powersgd_rank);
  const std::vector<SumWay> ways = {{GradSum::Flat, GradCompression::None, "flat"},
                                    {GradSum::Nodes, GradCompression::None, "nodes"},
                                    {GradSum::Nodes, GradCompression::Int8, "nodes + int8"},
                                    {GradSum::Nodes, GradCompression::PowerSgd, "nodes + powersgd r=" + r}};
  out << "gradient sums across nodes, for " << (subject == best ? "the recommended layout" : "the fastest layout")
      << " whose data replicas cross nodes, " << plan_name(base) << " (its step with each; codecs at the machine "
      << "file's rates):\n";
  std::vector<double> steps;
  size_t fastest = 0;
  std::string unmeasured;
  for (size_t i = 0; i < ways.size(); ++i) {
    Layout l = base;
    l.grad_sum = ways[i].sum;
    l.grad_compression = ways[i].codec;
    l.powersgd_rank = deck.parallel.powersgd_rank;
    steps.push_back(predict_step(deck, l, machine).step_s);
    if (ways[i].codec != GradCompression::None && !Links(l, machine).codec_rate_known())
      unmeasured += (unmeasured.empty() ? "" : " and ") + to_string(ways[i].codec);
    if (steps[i] < steps[fastest]) fastest = i;
    out << strfmt("  %-24s %10.2f ms  %5.2fx the flat sum's speed\n", ways[i].name.c_str(), 1e3 * steps[i],
                  steps[0] / steps[i]);
  }
  const SumWay& w = ways[fastest];
  if (w.codec == GradCompression::None) {
    out << "  compression does not pay here: the " << w.name << " sum is the fastest"
        << (fastest == 1 ? " (--set parallel.grad_sum=nodes)" : "") << "\n";
  } else {
    out << strfmt("  compression pays: %s, %.2fx the uncompressed node-by-node sum's speed", w.name.c_str(),
                  steps[1] / steps[fastest]);
    if (subject != best) {
      const double recommended = ranked[size_t(best)].step_s;
      out << strfmt(", %s the recommended layout's %.2f ms (%+.1f%%)",
                    steps[fastest] < recommended ? "faster than" : "still slower than", 1e3 * recommended,
                    100.0 * (steps[fastest] / recommended - 1));
    }
    out << "; it sums approximately, with error feedback (docs/parallelism.md has the losses it gave): --set "
           "parallel.grad_sum=nodes --set parallel.grad_compression="
        << to_string(w.codec) << (w.codec == GradCompression::PowerSgd ? " --set parallel.powersgd_rank=" + r : "")
        << "\n";
  }
  if (!unmeasured.empty())
    out << "  (no rate for " << unmeasured << " in the machine file: its own time is left out; strata calibrate "
        << "measures it)\n";
}

}  // namespace strata
