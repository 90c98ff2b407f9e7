#include "plan/plan_report.hpp"
#include "model/model_kind.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/log.hpp"
#include "plan/dry_models.hpp"
#include "plan/gradient_sum_choice.hpp"
#include "plan/layout_search.hpp"
#include "plan/links.hpp"

namespace strata {
namespace {

std::string bytes_text(double b) {
  if (b >= 1024.0 * 1024 * 1024) return strfmt("%.2f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return strfmt("%.2f MiB", b / (1024.0 * 1024));
  return strfmt("%.1f KiB", b / 1024.0);
}

std::string seconds_text(double s) { return s >= 1 ? strfmt("%.3f s", s) : strfmt("%.2f ms", s * 1e3); }

bool fits(const StepPrediction& p, const MachineFile& machine) {
  return double(p.memory_bytes()) <= machine.memory_capacity;
}

// What a layout that needs more memory than a rank has can trade time for: selective or
// full recomputation (not full under XPipe), without a pipeline gradient accumulation
// over 2, 4, ... micro-batches (each with and without recomputation), and each of these
// with ZeRO-1 where there are data replicas (not under XPipe), and with ZeRO-2 and, for the
// GPT, ZeRO-3; only variants the grid and batch admit.
std::vector<Layout> memory_variants(const Deck& deck, const Layout& l) {
  std::vector<Layout> out;
  const auto add = [&](const Layout& v) {
    try {
      const Deck d = with_layout(deck, v);
      check_model_fits_grid(d, "plan");
      check_model_deck(d, "plan");
      out.push_back(v);
    } catch (const UserError&) {
    }
  };
  // v as it is (unless it is l), and with each recomputation v does not have yet
  const auto with_recomputation = [&](Layout v) {
    if (v.micro_batches != l.micro_batches) add(v);
    if (v.recompute != Recompute::None) return;
    v.recompute = Recompute::Selective;
    add(v);
    if (v.pipeline > 1 && v.schedule == Schedule::XPipe) return;
    v.recompute = Recompute::Full;
    add(v);
  };
  with_recomputation(l);
  if (l.pipeline == 1) {
    const int64_t local = deck.data.batch_size / l.data;
    for (int64_t m = 2 * l.micro_batches; m <= local; m *= 2) {
      if (local % m != 0) continue;
      Layout v = l;
      v.micro_batches = int(m);
      with_recomputation(v);
    }
  }
  // ZeRO-1, ZeRO-2 and ZeRO-3 (the GPT only)
  if (l.zero == 0 && l.replicas() > 1 && !(l.pipeline > 1 && l.schedule == Schedule::XPipe)) {
    std::vector<Layout> sharded{l};
    sharded.insert(sharded.end(), out.begin(), out.end());
    for (Layout v : sharded) {
      v.zero = 1;
      add(v);
      v.zero = 2;
      add(v);
      if (!model_kind_of(deck).gathers_params) continue;
      v.zero = 3;
      add(v);
    }
  }
  return out;
}

// The memory options a layout uses: recomputation, accumulation without a pipeline, ZeRO-1.
std::vector<std::string> memory_option_names(const Layout& l) {
  std::vector<std::string> used;
  if (l.recompute != Recompute::None) used.push_back("recomputation");
  if (l.micro_batches > 1 && l.pipeline == 1) used.push_back("gradient accumulation");
  if (l.zero > 0) used.push_back("ZeRO-" + std::to_string(l.zero));
  return used;
}
size_t options_used(const Layout& l) { return memory_option_names(l).size(); }

// "recomputation and ZeRO-1": what a memory-bound layout added to the one it varies
std::string memory_options(const Layout& l, const Layout& varied) {
  std::vector<std::string> used;
  const std::vector<std::string> before = memory_option_names(varied);
  for (const auto& o : memory_option_names(l))
    if (std::find(before.begin(), before.end(), o) == before.end()) used.push_back(o);
  std::string out;
  for (size_t i = 0; i < used.size(); ++i) out += (i == 0 ? "" : i + 1 == used.size() ? " and " : ", ") + used[i];
  return out;
}

}  // namespace

std::vector<StepPrediction> rank_layouts(const Deck& deck, int ranks, const MachineFile& machine) {
  DryModels models;  // the same stage models for every micro-batch count and ZeRO stage
  std::vector<StepPrediction> out;
  for (const Layout& l : feasible_layouts(deck, ranks, &machine)) {
    out.push_back(predict_step(deck, l, machine, 0, &models));
    if (fits(out.back(), machine) || !is_gpt(deck.model)) continue;
    // memory-bound: the fastest variant that fits, beside the layout as asked; of variants
    // within 1% of it, the one with the fewest options (a simpler run at the same speed:
    // ZeRO-1's smaller update alone would otherwise win every tie)
    std::vector<StepPrediction> fitting;
    for (const Layout& v : memory_variants(deck, l)) {
      StepPrediction p = predict_step(deck, v, machine, 0, &models);
      if (fits(p, machine)) fitting.push_back(p);
    }
    StepPrediction best;
    for (const auto& p : fitting)
      if (best.step_s == 0 || p.step_s < best.step_s) best = p;
    const double fastest = best.step_s;
    for (const auto& p : fitting)
      if (p.step_s <= 1.01 * fastest && options_used(p.layout) < options_used(best.layout)) best = p;
    if (best.step_s > 0) {
      best.memory_bound = out.back().memory_bytes();
      best.varied = l;
      out.push_back(best);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const StepPrediction& a, const StepPrediction& b) { return a.step_s < b.step_s; });
  return out;
}

namespace {

// The deck's model and batch, the machine's rates, and which links the ranks span.
void print_plan_header(const Deck& deck, int ranks, const MachineFile& machine, std::ostream& out) {
  const auto& m = deck.model;
  out << strfmt(
      "strata plan: GPT %lld layers, C=%lld, %lld heads, vocab %lld, T=%lld; global batch %lld x %lld tokens; %d "
      "ranks\n",
      (long long)m.n_layer, (long long)m.n_embd, (long long)m.n_head, (long long)m.vocab_size, (long long)m.seq_len,
      (long long)deck.data.batch_size, (long long)m.seq_len, ranks);
  out << strfmt("machine: %s, %d ranks per node: GEMM %.3g TFLOP/s%s, memory %.3g GB/s and %s per rank\n",
                machine.name.c_str(), machine.ranks_per_node, machine.gemm_rate(m.precision) / 1e12,
                m.precision == Precision::BF16 ? " (bf16)" : "", machine.memory_bandwidth / 1e9,
                bytes_text(machine.memory_capacity).c_str());
  const int nodes = (ranks + machine.ranks_per_node - 1) / machine.ranks_per_node;
  if (ranks > machine.ranks_per_node && machine.has_inter_node) {
    const auto link = [](const LinkCosts& c) {
      return strfmt("all-reduce %.3g GB/s, %.3g us", 1e-9 / c.allreduce_beta, 1e6 * c.allreduce_alpha);
    };
    out << strfmt("links: %d nodes; within a node %s, across nodes %s (the groups that span nodes pay the latter)\n",
                  nodes, link(machine.intra_node).c_str(), link(machine.inter_node).c_str());
  }
  if (ranks > machine.ranks_per_node && !machine.has_inter_node)
    out << strfmt(
        "note: %d ranks span %d nodes of %d ranks, and the machine file has no [inter_node] costs: the "
        "intra-node ones are used across nodes\n",
        ranks, nodes, machine.ranks_per_node);
}

// The `shown` fastest layouts, one row each (! where a rank's memory is exceeded).
void print_ranked_rows(const Deck& deck, const std::vector<StepPrediction>& ranked, size_t shown, int ranks,
                       const MachineFile& machine, std::ostream& out) {
  const double tokens = double(deck.data.batch_size) * double(deck.model.seq_len);
  const double gemm_rate = machine.gemm_rate(deck.model.precision);
  out << strfmt(
      "%zu layouts fit the model and batch; the %zu fastest predicted, per step (memory and traffic: the busiest "
      "rank):\n",
      ranked.size(), shown);
  out << strfmt("%4s  %-40s %11s %11s %10s %9s %9s %9s %8s %11s\n", "rank", "layout", "memory", "comm/step", "step",
                "compute", "comm", "bubble", "of GEMM", "tokens/s");
  for (size_t i = 0; i < shown; ++i) {
    const auto& p = ranked[i];
    const bool fits = double(p.memory_bytes()) <= machine.memory_capacity;
    out << strfmt("%4zu%s %-40s %11s %11s %10s %9s %9s %8.1f%% %6.0f%% %11.0f\n", i + 1, fits ? " " : "!",
                  plan_name(p.layout).c_str(), bytes_text(double(p.memory_bytes())).c_str(),
                  bytes_text(p.wire_bytes).c_str(), seconds_text(p.step_s).c_str(), seconds_text(p.compute_s).c_str(),
                  seconds_text(p.comm_s).c_str(), 100.0 * p.bubble,
                  100.0 * p.model_flops / (p.step_s * ranks * gemm_rate), tokens / p.step_s);
  }
}

// The fastest layout that fits of each tensor split, side by side with the recommended one
// `r`; returns the fastest of the other splits' (nullptr: none fits).
const StepPrediction* print_best_per_split(const std::vector<StepPrediction>& ranked, const StepPrediction& r,
                                           const MachineFile& machine, std::ostream& out) {
  out << "the best of each tensor split that fits (comm: the exposed communication per step; then the bytes a rank "
         "sends):\n";
  const StepPrediction* runner_up = nullptr;
  const std::vector<const char*> labels = TensorParallel::kind_names();
  const int recommended = tensor_split_of(r.layout).kind();
  for (int kind = 0; kind < int(labels.size()); ++kind) {
    const StepPrediction* b = nullptr;
    for (const auto& p : ranked)
      if (tensor_split_of(p.layout).kind() == kind && double(p.memory_bytes()) <= machine.memory_capacity) {
        b = &p;
        break;
      }
    const char* label = labels[size_t(kind)];
    if (!b) {
      out << strfmt("  %-4s  (no layout fits)\n", label);
      continue;
    }
    if (kind != recommended && (!runner_up || b->step_s < runner_up->step_s)) runner_up = b;
    out << strfmt("  %-4s  %-40s %10s  compute %9s  comm %9s  %11s/step  %s\n", label, plan_name(b->layout).c_str(),
                  seconds_text(b->step_s).c_str(), seconds_text(b->compute_s).c_str(), seconds_text(b->comm_s).c_str(),
                  bytes_text(b->wire_bytes).c_str(),
                  b == &r ? "recommended"
                          : strfmt("%+.1f%%: comm %+.1f ms, compute %+.1f ms", 100.0 * (b->step_s / r.step_s - 1),
                                   1e3 * (b->comm_s - r.comm_s), 1e3 * (b->compute_s - r.compute_s))
                                .c_str());
  }
  return runner_up;
}

// The recommended layout (row `best` of the table), how to run it, and which of its groups
// cross nodes.
void print_recommendation(const Deck& deck, const StepPrediction& r, int best, int ranks, const MachineFile& machine,
                          std::ostream& out) {
  out << "recommended: " << plan_name(r.layout)
      << strfmt(
             " (rank %d): %s per step, %s per rank (parameters, gradients and moments %s; activations and "
             "messages %s)",
             best + 1, seconds_text(r.step_s).c_str(), bytes_text(double(r.memory_bytes())).c_str(),
             bytes_text(double(r.state_bytes)).c_str(), bytes_text(double(r.activation_bytes)).c_str());
  out << "\n  run it with:";
  for (const auto& o : run_overrides(deck, r.layout)) out << " --set " << o;
  out << "\n";
  if (ranks <= machine.ranks_per_node) return;
  const Links links(r.layout, machine);
  std::string across, within;
  for (const auto& [group, size] : std::vector<std::pair<std::string, int>>{{"tensor", r.layout.tensor_size()},
                                                                            {"context", r.layout.context},
                                                                            {"pipeline", r.layout.pipeline},
                                                                            {"data", r.layout.data}}) {
    if (size < 2) continue;
    std::string& to = links.crosses_nodes(group) ? across : within;
    to += (to.empty() ? "" : ", ") + group;
  }
  out << "  nodes: " << (across.empty() ? "no group" : across) << " across nodes"
      << (within.empty() ? "" : "; " + within + " within a node") << " (ranks placed by node, tensor fastest)\n";
}

// Why this split: what the best of the next one loses, and where most of it goes.
void print_why(const StepPrediction& r, const StepPrediction& runner_up, std::ostream& out) {
  const double comm = runner_up.comm_s - r.comm_s, compute = runner_up.compute_s - r.compute_s;
  const double idle = (runner_up.step_s - r.step_s) - comm - compute;  // the bubble and waits between stages
  const bool by_comm = std::abs(comm) >= std::abs(compute) && std::abs(comm) >= std::abs(idle);
  const bool by_compute = !by_comm && std::abs(compute) >= std::abs(idle);
  const char* most = by_comm ? "exposed communication" : by_compute ? "computation" : "pipeline idle time";
  out << strfmt(
      "  why: the fastest layout that fits; the best of the next split, %s, is %.1f%% slower, mostly by "
      "its %s (%+.3g ms of %+.3g ms)\n",
      plan_name(runner_up.layout).c_str(), 100.0 * (runner_up.step_s / r.step_s - 1), most,
      1e3 * (by_comm      ? comm
             : by_compute ? compute
                          : idle),
      1e3 * (runner_up.step_s - r.step_s));
}

}  // namespace

int print_layout_plan(const Deck& deck, int ranks, const MachineFile& machine, std::ostream& out, int top) {
  const std::vector<StepPrediction> ranked = rank_layouts(deck, ranks, machine);
  print_plan_header(deck, ranks, machine, out);
  if (ranked.empty())
    throw UserError("strata plan: no layout of " + std::to_string(ranks) + " ranks fits the deck's model and batch");
  int best = -1;
  for (size_t i = 0; i < ranked.size() && best < 0; ++i)
    if (double(ranked[i].memory_bytes()) <= machine.memory_capacity) best = int(i);
  const size_t shown = top > 0 ? std::min(ranked.size(), size_t(top)) : ranked.size();
  print_ranked_rows(deck, ranked, shown, ranks, machine, out);
  if (best < 0) {
    out << "recommended: none: every layout needs more than " << bytes_text(machine.memory_capacity)
        << " on some rank (the rows marked !); use more ranks or a smaller micro-batch\n";
    return -1;
  }
  const auto& r = ranked[size_t(best)];
  const StepPrediction* runner_up = print_best_per_split(ranked, r, machine, out);
  print_recommendation(deck, r, best, ranks, machine, out);
  if (runner_up) print_why(r, *runner_up, out);
  print_gradient_sum_choice(deck, ranked, best, machine, out);
  if (r.memory_bound > 0)
    out << "  memory-bound: without " << memory_options(r.layout, r.varied) << " it needs "
        << bytes_text(r.memory_bound) << " per rank, more than the " << bytes_text(machine.memory_capacity)
        << " a rank has\n";
  bool mgrit_shown = false;
  for (size_t i = 0; i < shown; ++i) mgrit_shown = mgrit_shown || ranked[i].layout.mgrit();
  if (mgrit_shown || r.layout.mgrit())
    out << strfmt(
        "(mgrit: layer ranks solved by MGRIT with :L levels, %lld forward / %lld backward V-cycles, timed per step; "
        "with more than one level its gradients are inexact, so it may need more steps to the same loss than the "
        "exact layouts (docs/parallelism.md measures it); layerpar.control = \"switch\" bounds the bias)\n",
        (long long)deck.layerpar.fwd_iterations, (long long)deck.layerpar.bwd_iterations);
  if (shown < ranked.size()) out << "(" << ranked.size() - shown << " slower layouts not shown; --top 0 shows all)\n";
  out << "(! = needs more memory than a rank has; of GEMM: the model's FLOPs per second over all ranks' GEMM rate)\n";
  return best;
}

int print_thread_plan(const Deck& deck, int cores, const MachineFile& machine, std::ostream& out) {
  const auto& m = deck.model;
  const int node = machine.node_cores();
  const double tokens = double(deck.data.batch_size) * double(m.seq_len);
  out << strfmt(
      "strata plan: GPT %lld layers, C=%lld, T=%lld; global batch %lld x %lld tokens; %d cores as ranks x "
      "threads\n",
      (long long)m.n_layer, (long long)m.n_embd, (long long)m.seq_len, (long long)deck.data.batch_size,
      (long long)m.seq_len, cores);
  out << strfmt("machine: %s, %d cores per node, measured with %d thread%s per rank%s\n", machine.name.c_str(), node,
                machine.threads_per_rank, machine.threads_per_rank == 1 ? "" : "s",
                machine.threads.counts.empty()
                    ? "; no [threads] table: rates taken to grow linearly with threads"
                    : strfmt("; [threads] measured at up to %d", machine.threads.counts.back()).c_str());
  out << strfmt("%8s %8s  %-40s %11s %10s %11s %12s\n", "ranks", "threads", "best layout", "memory", "step", "tokens/s",
                "GEMM/rank");
  int best_t = -1;
  double best_s = 0;
  std::string best_layout, best_sets;
  for (int t = 1; t <= std::min(node, cores); ++t) {
    if (node % t != 0 || cores % t != 0) continue;
    const MachineFile mt = machine.at_threads(t);
    const int ranks = cores / t;
    const std::vector<StepPrediction> ranked = rank_layouts(deck, ranks, mt);
    const StepPrediction* fit = nullptr;
    for (const auto& p : ranked)
      if (double(p.memory_bytes()) <= mt.memory_capacity) {
        fit = &p;
        break;
      }
    const double rate = mt.gemm_rate(m.precision);
    if (!fit) {
      out << strfmt("%8d %8d  %-40s\n", ranks, t,
                    ranked.empty() ? "(no layout fits the model and batch)" : "(none fits in a rank's memory)");
      continue;
    }
    out << strfmt("%8d %8d  %-40s %11s %10s %11.0f %9.3g TF/s\n", ranks, t, plan_name(fit->layout).c_str(),
                  bytes_text(double(fit->memory_bytes())).c_str(), seconds_text(fit->step_s).c_str(),
                  tokens / fit->step_s, rate / 1e12);
    if (best_t < 0 || fit->step_s < best_s) {
      best_t = t;
      best_s = fit->step_s;
      best_layout = plan_name(fit->layout);
      best_sets.clear();
      for (const auto& o : run_overrides(deck, fit->layout)) best_sets += " --set " + o;
    }
  }
  if (best_t < 0) {
    out << "recommended: none: no ranks x threads split fits the model in a rank's memory\n";
    return -1;
  }
  out << strfmt(
      "recommended: %d ranks x %d threads, %s: %s per step\n  run it with: mpiexec -n %d strata train DECK "
      "--threads %d%s\n",
      cores / best_t, best_t, best_layout.c_str(), seconds_text(best_s).c_str(), cores / best_t, best_t,
      best_sets.c_str());
  out << "(each row: the fastest layout of its ranks that fits; rates per rank scaled from the machine file's by "
         "its [threads] speed-ups)\n";
  return best_t;
}

}  // namespace strata
