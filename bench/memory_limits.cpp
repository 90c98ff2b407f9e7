// How large a GPT fits on N ranks of a machine with each memory option: for a family of
// GPT shapes (GPT-3's and Megatron-LM's scaling studies), the largest one for which some
// layout of N ranks fits a rank's memory (the planner's predict_memory, which plan_check
// holds exact against the engine), with none of the options, each alone, and all
// together. Prints a markdown table (docs/planner.md has one).
//
//   build/release/bench/memory_limits MACHINE.toml [--moe E] RANKS[:DATA] [RANKS[:DATA] ...]
//
// --moe E: the mixture-of-experts family of the same shapes: every other block's MLP a
// mixture of E experts of the dense MLP's width, top 2 (GShard's layout), the experts
// split over any divisor of the data ranks that divides E (parallel.expert); mixtures run
// without a tensor split, so the layouts are data x pipeline x context x expert.
//
// RANKS:DATA keeps the layouts of DATA data-parallel replicas only (a replica of
// RANKS / DATA ranks): where the replicas are wanted for throughput, ZeRO's share shows.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "model/model_kind.hpp"
#include "plan/layout.hpp"
#include "plan/layout_search.hpp"
#include "plan/machine_file.hpp"
#include "plan/step_prediction.hpp"

using namespace strata;

namespace {

struct Shape {
  const char* name;
  int64_t layers, width, heads;
};

// GPT-3 (Brown et al. 2020, Table 2.1) and Megatron-LM (Narayanan et al. 2021, Table 1);
// vocabulary 51,200, context 2048, 512 sequences a step for all.
const std::vector<Shape> kFamily = {
    {"GPT-3 XL", 24, 2048, 16},         {"GPT-3 2.7B", 32, 2560, 32},    {"GPT-3 6.7B", 32, 4096, 32},
    {"GPT-3 13B", 40, 5120, 40},        {"Megatron 18B", 40, 6144, 48},  {"Megatron 39B", 48, 8192, 64},
    {"Megatron 76B", 60, 10240, 80},    {"GPT-3 175B", 96, 12288, 96},   {"Megatron 310B", 96, 16384, 128},
    {"Megatron 530B", 105, 20480, 128}, {"Megatron 1T", 128, 25600, 160}};

Deck deck_of(const Shape& s, int64_t experts) {
  const std::string moe =
      experts > 0 ? "\nmoe_experts = " + std::to_string(experts) + "\nmoe_top_k = 2\nmoe_every = 2" : "";
  const std::string text = "[model]\nn_layer = " + std::to_string(s.layers) + "\nn_embd = " + std::to_string(s.width) +
                           "\nn_head = " + std::to_string(s.heads) + moe +
                           "\nvocab_size = 51200\nseq_len = 2048\n[data]\nkind = \"random\"\nbatch_size = 512\n";
  return parse_model_deck(text, s.name, {});
}

struct Option {
  const char* name;
  bool accumulate;  // without a pipeline: micro-batches 2, 4, ... of the replica's batch
  Recompute recompute;
  int zero;
};

// The layouts of `ranks` ranks with the option that can need the least memory:
// feasible_layouts of the deck asking for it, of the pipelines only 1F1B with the most
// micro-batches of each grid (1F1B keeps min(p, m) micro-batches of B/m in flight, GPipe
// all m, XPipe more), and with accumulation each pipeline-free layout with 2, 4, ...
// micro-batches.
std::vector<Layout> layouts_with(const Deck& base, int ranks, int data, const Option& o) {
  Deck d = base;
  d.parallel.recompute = o.recompute;
  d.parallel.zero = o.zero;
  std::vector<Layout> out;
  for (const Layout& l : feasible_layouts(d, ranks)) {
    if (l.mgrit()) continue;  // (layer-parallel layouts: the planner weighs them; this bench, the memory options)
    if ((l.pipeline > 1 && l.schedule != Schedule::OneFOneB) || (data > 0 && l.data != data)) continue;
    const bool same_grid = !out.empty() && out.back().pipeline > 1 && out.back().data == l.data &&
                           out.back().pipeline == l.pipeline && out.back().tensor_size() == l.tensor_size() &&
                           out.back().tensor_split() == l.tensor_split();
    if (same_grid && out.back().micro_batches < l.micro_batches)
      out.back() = l;
    else
      out.push_back(l);
  }
  if (!o.accumulate) return out;
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    if (out[i].pipeline > 1) continue;
    const int64_t local = d.data.batch_size / out[i].data;
    for (int64_t m = 2; m <= local; m *= 2)
      if (local % m == 0) {
        Layout v = out[i];
        v.micro_batches = int(m);
        out.push_back(v);
      }
  }
  return out;
}

// The layout of least memory per rank, and that memory.
std::pair<Layout, double> least_memory(const Deck& deck, int ranks, int data, const Option& o) {
  std::pair<Layout, double> best{Layout{}, -1};
  for (const Layout& l : layouts_with(deck, ranks, data, o)) {
    const MemoryPrediction m = predict_memory(deck, l);
    const double bytes = double(m.state_bytes + m.activation_bytes);
    if (best.second < 0 || bytes < best.second) best = {l, bytes};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      if (argc < 3) throw UserError("usage: memory_limits MACHINE.toml [--moe E] RANKS[:DATA] [RANKS[:DATA] ...]");
      const MachineFile machine = read_machine_file(argv[1]);
      int first = 2;
      int64_t experts = 0;
      if (std::string(argv[2]) == "--moe" && argc > 4) {
        experts = std::atoll(argv[3]);
        first = 4;
      }
      const std::vector<Option> options = {{"none", false, Recompute::None, 0},
                                           {"gradient accumulation", true, Recompute::None, 0},
                                           {"selective recomputation", false, Recompute::Selective, 0},
                                           {"full recomputation", false, Recompute::Full, 0},
                                           {"ZeRO-1", false, Recompute::None, 1},
                                           {"ZeRO-2", false, Recompute::None, 2},
                                           {"ZeRO-3", false, Recompute::None, 3},
                                           {"all (accumulation, full, ZeRO-1)", true, Recompute::Full, 1},
                                           {"all (accumulation, full, ZeRO-2)", true, Recompute::Full, 2},
                                           {"all (accumulation, full, ZeRO-3)", true, Recompute::Full, 3}};
      std::printf(
          "machine %s: %.1f GiB per rank; GPT shapes of GPT-3 and Megatron-LM%s, vocabulary 51200, T = 2048, "
          "512 sequences per step\n\n",
          machine.name.c_str(), machine.memory_capacity / double(1 << 30),
          experts > 0 ? strfmt(" with every other MLP a mixture of %lld experts (top 2)", (long long)experts).c_str()
                      : "");
      for (int a = first; a < argc; ++a) {
        const std::string arg = argv[a];
        const int ranks = std::atoi(arg.c_str());
        const int data = arg.find(':') == std::string::npos ? 0 : std::atoi(arg.c_str() + arg.find(':') + 1);
        std::printf(
            "%d ranks%s\n\n| option | largest model that fits | parameters | layout of least memory | per rank |\n"
            "|---|---|---|---|---|\n",
            ranks, data > 0 ? strfmt(", %d data-parallel replicas", data).c_str() : "");
        for (const Option& o : options) {
          std::string fits = "none of the family", layout = "-", per_rank = "-", params = "-";
          for (const Shape& s : kFamily) {
            const Deck deck = deck_of(s, experts);
            const auto [l, bytes] = least_memory(deck, ranks, data, o);
            if (bytes < 0 || bytes > machine.memory_capacity) break;
            fits = s.name;
            params = strfmt("%.2fB", double(make_model(deck, {}, 0, {}, false)->params().table().global_numel()) / 1e9);
            layout = plan_name(l);
            per_rank = strfmt("%.1f GiB", bytes / double(1 << 30));
          }
          std::printf("| %s | %s | %s | %s | %s |\n", o.name, fits.c_str(), params.c_str(), layout.c_str(),
                      per_rank.c_str());
          std::fflush(stdout);
        }
        std::printf("\n");
      }
    } catch (const StrataError& e) {
      std::fprintf(stderr, "memory_limits: %s\n", e.what());
      rc = 2;
    }
  }
  MPI_Finalize();
  return rc;
}
