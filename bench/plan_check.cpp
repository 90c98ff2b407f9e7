// The planner against the engine, for every layout of this job's rank count: each layout
// trains the deck for a few steps through the real TrainJob and RunLoop, and its communication
// counters, step time, activation memory and parameters are printed beside what
// `strata plan` predicts for it. Bytes and calls must agree exactly on every rank, group
// and kind of collective, and parameters, activation bytes and the whole memory
// (parameters, gradients, AdamW moments and activations) on the fullest rank (the
// exit code says whether they did; "!" marks activations that differ; mixtures of experts:
// their rows' bytes and caches follow the routing, and are printed against the balanced
// prediction, with the state (parameters, gradients, moments) exact); times are compared
// on the warm steps (after the first), and only mean something where every rank has a core.
//
//   OPENBLAS_NUM_THREADS=1 mpiexec -n N build/release/bench/plan_check DECK
//       [--machine MACHINE.toml] [--steps S] [--sequence-parallel] [--three-d] [--schedule NAME[,NAME...]]
//       [--expect N]
//       [--set section.key=value ...]
// --three-d: the 3D layouts only (without it, every layout but those, so that each run stays short).
// Layer-parallel (mgrit) layouts are left out: their messages are the solvers' states, and
// tests/engine/test_gpt_layer_parallel.cpp holds the planner to the GPT's MGRIT runs
// ("[mgrit][gpt][plan]": each layer rank's steps per level and messages exactly, the
// fullest rank's memory within 1%).
// --schedule NAMES: of the pipelined layouts, only those of these schedules (a comma list).
// --expect N: fail unless at least N layouts were checked (1 by default): a check of none
// would agree with anything.
// --sequence-parallel: the 1D layouts with sequence parallelism (a deck cannot ask for it
// without a 1D split, and the layouts here start from none).
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "comm/control.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "model/model_kind.hpp"
#include "plan/layout.hpp"
#include "plan/layout_search.hpp"
#include "plan/machine_file.hpp"
#include "plan/step_prediction.hpp"
#include "train/run_loop.hpp"
#include "train/train_job.hpp"

using namespace strata;

namespace {

// This rank's mismatches between predicted and counted traffic ("" when they agree). The
// rows of mixture-of-experts layers (the "expert" group's alltoallv) go where the router
// sends them, so for those the calls must agree and the bytes are what the routing made:
// `routed` gets counted / predicted (the prediction is the balanced routing's).
// routed_bytes: the rows' bytes predicted and counted on this rank.
std::string compare(const Traffic& predicted, const TrainJob& trainer, double& routed,
                    std::pair<double, double>& routed_bytes) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> counted;  // calls, bytes
  for (const auto& [group, comm] : trainer.grid().reported_comms())
    for (const auto& [kind, st] : comm->stats())
      if (st.calls > 0) counted[{group, kind}] = {st.calls, st.bytes};
  std::string out;
  for (const auto& [key, e] : predicted.entries()) {
    const auto it = counted.find(key);
    const std::pair<int64_t, int64_t> got = it == counted.end() ? std::make_pair(int64_t(0), int64_t(0)) : it->second;
    const bool by_routing = key == std::make_pair(std::string("expert"), std::string("alltoallv"));
    if (by_routing && e.payload_bytes > 0) {
      routed = double(got.second) / double(e.payload_bytes);
      routed_bytes = {double(e.payload_bytes), double(got.second)};
    }
    if (got.first != e.calls || (got.second != e.payload_bytes && !by_routing))
      out += strfmt(" %s/%s: predicted %lld calls %lld B, counted %lld calls %lld B;", key.first.c_str(),
                    key.second.c_str(), (long long)e.calls, (long long)e.payload_bytes, (long long)got.first,
                    (long long)got.second);
    if (it != counted.end()) counted.erase(it);
  }
  for (const auto& [key, got] : counted)
    out += strfmt(" %s/%s: not predicted, counted %lld calls %lld B;", key.first.c_str(), key.second.c_str(),
                  (long long)got.first, (long long)got.second);
  return out;
}

double max_over_ranks(double x) { return max_over(MPI_COMM_WORLD, x); }

struct Options {
  std::string deck_path, machine_path = STRATA_MACHINES_DIR "/debian-2core-vm.toml";
  int steps = 4;
  int expected = 1;  // --expect N: fail when fewer layouts were checked
  bool sequence_parallel = false, three_d = false;
  std::string only_schedules;  // ",1f1b,zb-h1,": a schedule's name is looked up as ",name,"
  std::vector<std::string> overrides = {"parallel.data=1",        "parallel.pipeline=1",    "parallel.context=1",
                                        "parallel.tensor_rows=1", "parallel.tensor_cols=1", "parallel.micro_batches=1",
                                        "run.val_every=0"};
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--machine" && i + 1 < argc)
      o.machine_path = argv[++i];
    else if (a == "--steps" && i + 1 < argc)
      o.steps = std::max(2, std::atoi(argv[++i]));
    else if (a == "--set" && i + 1 < argc)
      o.overrides.push_back(argv[++i]);
    else if (a == "--sequence-parallel")
      o.sequence_parallel = true;
    else if (a == "--three-d")
      o.three_d = true;
    else if (a == "--expect" && i + 1 < argc)
      o.expected = std::atoi(argv[++i]);
    else if (a == "--schedule" && i + 1 < argc)
      o.only_schedules = "," + std::string(argv[++i]) + ",";
    else
      o.deck_path = a;
  }
  o.overrides.push_back("run.steps=" + std::to_string(o.steps));
  o.overrides.push_back("run.log_every=" + std::to_string(o.steps));
  return o;
}

// Whether plan_check weighs this layout: its kind of tensor split, not MGRIT's (above), and
// the schedules asked for.
bool weighed(const Layout& l, const Options& o) {
  if ((l.tensor_split() == TensorMode::ThreeD) != o.three_d || l.mgrit()) return false;
  return o.only_schedules.empty() || l.pipeline == 1 ||
         o.only_schedules.find("," + to_string(l.schedule) + ",") != std::string::npos;
}

// What this rank's stage should have sent over the run, against what it counted: one
// round per step, or for XPipe the trainer's two streams (the first step alone, then the
// rest). Dropless mixtures send every assignment's row to its expert and back, forward and
// backward: summed over the ranks the bytes are the formula's whatever the routing.
std::string traffic_mismatch(const Deck& d, const Layout& l, const TrainJob& trainer, int steps, Traffic& predicted,
                             double& routed) {
  const int stage = trainer.grid().coords().pipeline;
  NodeSum node_sum;  // grad_sum = "nodes": the replicas on this rank's node, as the Grid found them, and its place
  for (const auto& [group, comm] : trainer.grid().reported_comms())
    if (group == "data_node") node_sum = {comm->size(), l.grad_compression, int(l.powersgd_rank), comm->rank()};
  if (l.pipeline > 1 && l.schedule == Schedule::XPipe) {
    predicted.add(stage_traffic(d, l, stage, 1, nullptr, node_sum));
    predicted.add(stage_traffic(d, l, stage, steps - 1, nullptr, node_sum));
  } else {
    predicted.add(stage_traffic(d, l, stage, 1, nullptr, node_sum), steps);
  }
  std::pair<double, double> routed_bytes{0, 0};
  std::string mismatch = compare(predicted, trainer, routed, routed_bytes);
  std::vector<double> routed_sum = {routed_bytes.first, routed_bytes.second};
  sum_over(MPI_COMM_WORLD, routed_sum);
  if (d.model.moe_experts > 0 && d.model.moe_capacity_factor == 0 && routed_sum[0] != routed_sum[1])
    mismatch += strfmt(" expert/alltoallv summed over the ranks: formula %.0f B, counted %.0f B;", routed_sum[0],
                       routed_sum[1]);
  return mismatch;
}

// The activations of the fullest rank (state + activations; of equals the lowest), as the
// planner reports the fullest stage's.
double fullest_rank_activations(const TrainResult& result, int rank, int ranks) {
  std::vector<double> totals(size_t(ranks), 0.0), acts(size_t(ranks), 0.0);
  totals[size_t(rank)] = double(result.state_bytes + result.activation_bytes);
  acts[size_t(rank)] = double(result.activation_bytes);
  sum_over(MPI_COMM_WORLD, totals);
  sum_over(MPI_COMM_WORLD, acts);
  return acts[size_t(std::max_element(totals.begin(), totals.end()) - totals.begin())];
}

// Trains `l` for o.steps and holds its traffic, parameters, activations and memory to the
// planner's prediction; prints its row. Returns the failures (0, 1 or 2).
int check_layout(const Deck& deck, const Layout& l, const Options& o, const MachineFile& machine, int rank, int ranks) {
  const Deck d = with_layout(deck, l);
  TrainOptions opts;
  opts.write_outputs = false;
  opts.job.print = false;
  opts.job.probe_gemm = false;
  TrainJob trainer(d, MPI_COMM_WORLD, opts.job);
  const TrainResult result = RunLoop(d, opts, trainer).run();
  const int steps = o.steps, stage = trainer.grid().coords().pipeline;
  const bool xpipe = l.pipeline > 1 && l.schedule == Schedule::XPipe;
  Traffic predicted;
  double routed = 0;  // mixtures of experts: the rows' bytes counted over the balanced routing's
  const std::string mismatch = traffic_mismatch(d, l, trainer, steps, predicted, routed);
  if (!mismatch.empty())
    std::fprintf(stderr, "plan_check: %s, rank %d:%s\n", plan_name(l).c_str(), rank, mismatch.c_str());
  double counted_wire = 0;
  for (const auto& [group, comm] : trainer.grid().reported_comms())
    for (const auto& [kind, st] : comm->stats()) counted_wire += st.wire_bytes;
  const int bad = int(max_over_ranks(mismatch.empty() ? 0.0 : 1.0));
  const double pred_wire = max_over_ranks(predicted.wire_bytes()) / steps / double(1 << 20);
  const double meas_wire = max_over_ranks(counted_wire) / steps / double(1 << 20);
  const StepPrediction p = predict_step(d, l, machine, xpipe ? steps - 1 : 0);
  const double meas_ms = 1e3 * max_over_ranks(result.warm_seconds / double(std::max<int64_t>(1, result.warm_steps)));
  const double meas_act = fullest_rank_activations(result, rank, ranks) / double(1 << 20);
  // mixtures of experts: their caches hold the rows the router sent (the prediction is
  // the balanced routing's), so the activations and the memory are reported, not required equal
  const bool routing = d.model.moe_experts > 0;
  const bool act_differ = meas_act != double(p.activation_bytes) / double(1 << 20) && !routing;
  int64_t held = 0;  // the parameters' values (with ZeRO-1 over two regions the buffers have a gap)
  for (const auto& info : trainer.model().params().infos()) held += info.numel;
  const bool params_differ = max_over_ranks(held != p.stage_params[size_t(stage)] ? 1.0 : 0.0) > 0;
  // parameters, gradients and moments (ZeRO-1: a block of them) with the activations, on the fullest rank
  const double meas_memory = max_over_ranks(double(result.state_bytes + result.activation_bytes));
  const double meas_state = max_over_ranks(double(result.state_bytes));
  const double pred_state = double(*std::max_element(p.stage_state.begin(), p.stage_state.end()));
  const bool memory_differs = routing ? meas_state != pred_state : meas_memory != double(p.memory_bytes());
  routed = max_over_ranks(routed);
  if (routing && routed > 0 && rank == 0)
    std::printf(
        "  %s: mixture rows %.2fx the balanced routing's bytes; activations %.2f MiB measured, %.2f "
        "predicted at balance; state %s\n",
        plan_name(l).c_str(), routed, meas_act, double(p.activation_bytes) / double(1 << 20),
        memory_differs ? "DIFFERS" : "exact");
  if (memory_differs && rank == 0)
    std::fprintf(stderr, "plan_check: %s: %s per rank predicted %.0f B, measured %.0f B\n", plan_name(l).c_str(),
                 routing ? "state" : "memory", routing ? pred_state : double(p.memory_bytes()),
                 routing ? meas_state : meas_memory);
  if (rank == 0)
    std::printf("%-40s %12.3f %12.3f %7s %10.2f %10.2f %6.2f %10.2f %10.2f%1s %11s\n", plan_name(l).c_str(), pred_wire,
                meas_wire, bad ? "DIFFER" : "exact", 1e3 * p.step_s, meas_ms, meas_ms / (1e3 * p.step_s),
                double(p.activation_bytes) / double(1 << 20), meas_act, act_differ ? "!" : "",
                params_differ ? "DIFFER" : "exact");
  return bad + (params_differ || act_differ || memory_differs ? 1 : 0);
}

// Every weighed layout of the deck on this job's ranks; the summary lines. Returns the failures.
int check_layouts(const Options& o, int rank, int ranks) {
  Deck deck = load_model_deck(o.deck_path, o.overrides, KeyEffect::Ignore);  // (the layouts are the planner's)
  deck.parallel.sequence_parallel = o.sequence_parallel;          // feasible_layouts gives it to the 1D splits
  if (o.three_d) deck.parallel.tensor_mode = TensorMode::ThreeD;  // (and the 3D ones where the deck asks)
  const MachineFile machine = read_machine_file(o.machine_path);
  if (rank == 0) {
    std::printf("plan_check: %s on %d ranks, machine %s, %d steps per layout%s\n", o.deck_path.c_str(), ranks,
                machine.name.c_str(), o.steps,
                ranks > machine.ranks_per_node
                    ? " (more ranks than the machine file's node has cores: times not comparable)"
                    : "");
    std::printf("%-40s %12s %12s %7s %10s %10s %6s %10s %10s %11s\n", "layout", "pred MiB/st", "counted", "bytes",
                "pred ms", "meas ms", "ratio", "pred act", "meas act", "params");
  }
  int failures = 0, checked = 0;
  for (const Layout& l : feasible_layouts(deck, ranks))
    if (weighed(l, o)) {
      ++checked;
      failures += check_layout(deck, l, o, machine, rank, ranks);
    }
  // a check of no layout agrees with anything: the test names how many it expects
  const bool too_few = checked < std::max(o.expected, 1);
  if (rank == 0) {
    std::printf("plan_check: %d layouts checked (at least %d expected)\n", checked, o.expected);
    std::printf("plan_check: %s\n", too_few         ? "FEWER LAYOUTS THAN EXPECTED"
                                    : failures == 0 ? "bytes and calls agree exactly on every rank, group and kind; "
                                                      "parameters, activations and memory too"
                                                    : "MISMATCHES (see above)");
  }
  return failures + (too_few ? 1 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int failures = 0, rank = 0, ranks = 1;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    try {
      failures = check_layouts(parse_options(argc, argv), rank, ranks);
    } catch (const UserError& e) {
      if (rank == 0) std::fprintf(stderr, "plan_check: %s\n", e.what());
      failures = 1;
    }
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
