// strata: one SPMD executable.
//   strata train DECK [--set section.key=value ...] [--restart PATH|latest] [--trace FILE]
//   strata plan DECK --schedule [--set section.key=value ...]
//   strata plan DECK --ranks N [--machine MACHINE.toml] [--top K] [--set ...]
//   strata calibrate DECK [--out MACHINE.toml] [--name NAME]   (with the ranks of one node)
//   strata inspect CKPT.h5
//   strata generate CKPT.h5 [--prompt TEXT] [--tokens N] [--temperature T] [--seed S]
//
// Exit codes: 0 success, also after a signal (SIGUSR1/SIGTERM) or run.max_walltime made
// training write a checkpoint and stop early; 2 bad input (deck, data, layout, command
// line, checkpoint), reported once by rank 0 as one line; 3 `inspect` found tensors that
// fail their checksum; 1 internal error. An error on some ranks only, after set-up, aborts
// the whole job (MPI_Abort) rather than leaving the others waiting.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include <iostream>

#include "core/deck.hpp"
#include "core/error.hpp"
#include "plan/calibrate.hpp"
#include "plan/machine_file.hpp"
#include "plan/plan_report.hpp"
#include "train/classifier_trainer.hpp"
#include "train/generate.hpp"
#include "train/inspect_checkpoint.hpp"
#include "train/plan_schedule.hpp"
#include "train/stop_signals.hpp"
#include "train/trainer.hpp"

namespace {

#if defined(KOKKOS_ENABLE_CUDA)
// One GPU per rank, chosen by the rank's index on its node, unless the user chose
// (KOKKOS_DEVICE_ID / KOKKOS_NUM_DEVICES, which Kokkos reads at initialisation).
void bind_device_by_local_rank() {
  if (std::getenv("KOKKOS_DEVICE_ID") || std::getenv("KOKKOS_NUM_DEVICES")) return;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0, devices = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return;  // Kokkos reports it
  setenv("KOKKOS_DEVICE_ID", std::to_string(local % devices).c_str(), 1);
}
#else
void bind_device_by_local_rank() {}
#endif

int run_train(const std::string& deck_path, const std::vector<std::string>& overrides, const std::string& restart,
              const std::string& trace) {
  // Every rank reads and validates the deck: the outcome is the same everywhere, so a bad
  // deck ends all ranks with the same error and no communication is needed.
  const strata::Deck deck = strata::load_deck(deck_path, overrides);
  strata::install_stop_signal_handlers();
  strata::TrainOptions opts;
  opts.restart = restart;
  opts.trace = trace;
  if (deck.model.kind == "resnet") {  // image classification, layer-parallel by MGRIT
    if (!trace.empty()) throw strata::UserError("--trace records pipeline timelines; model.kind = \"resnet\" has none");
    strata::ClassifierTrainer trainer(deck, MPI_COMM_WORLD, opts);
    trainer.run();
    return strata::kExitOk;
  }
  strata::Trainer trainer(deck, MPI_COMM_WORLD, opts);
  trainer.run();
  return strata::kExitOk;
}

struct PlanRequest {
  bool schedule = false;
  int ranks = 0, top = 20;
  std::string machine = STRATA_MACHINES_DIR "/debian-2core-vm.toml";
};

int run_plan(int rank, const std::string& deck_path, const std::vector<std::string>& overrides, const PlanRequest& req) {
  if (req.schedule == (req.ranks > 0))
    throw strata::UserError("strata plan: say what to plan: --schedule (the deck's pipeline schedule) or --ranks N "
                            "(the best layout for N ranks)");
  if (req.schedule) {
    const strata::Deck deck = strata::load_deck(deck_path, overrides);
    if (rank == 0) strata::print_schedule_plan(deck, std::cout);
    return strata::kExitOk;
  }
  // the deck's own [parallel] layout need not fit N ranks: the planner chooses one
  std::vector<std::string> serial = {"parallel.data=1", "parallel.pipeline=1", "parallel.tensor_rows=1",
                                     "parallel.tensor_cols=1", "parallel.micro_batches=1"};
  serial.insert(serial.end(), overrides.begin(), overrides.end());
  const strata::Deck deck = strata::load_deck(deck_path, serial);
  if (deck.model.kind != "gpt") throw strata::UserError("strata plan --ranks: plans GPT decks (model.kind = \"gpt\")");
  const strata::MachineFile machine = strata::read_machine_file(req.machine);
  if (rank == 0) strata::print_layout_plan(deck, req.ranks, machine, std::cout, req.top);
  return strata::kExitOk;
}

// Every rank measures; rank 0 prints the measurements and writes the machine file.
int run_calibrate(int rank, const std::string& deck_path, const std::vector<std::string>& overrides,
                  const std::string& out, const std::string& name) {
  const strata::Deck deck = strata::load_deck(deck_path, overrides);
  if (!out.empty() && rank == 0) {  // refuse an unwritable path before measuring
    std::ofstream probe(out, std::ios::app);
    if (!probe) throw strata::UserError("cannot write the machine file '" + out + "'");
  }
  const strata::Calibration cal = strata::calibrate(deck, MPI_COMM_WORLD, name);
  if (rank != 0) return strata::kExitOk;
  std::printf("gemm at the model's shapes (GFLOP/s, one rank):\n");
  for (const auto& [shape, gf] : cal.gemm) std::printf("  %-24s %8.1f\n", shape.c_str(), gf);
  if (!cal.samples.empty()) {
    std::printf("%-10s %12s %14s %14s\n", "link", "bytes", "measured_us", "fitted_us");
    for (const auto& s : cal.samples)
      std::printf("%-10s %12.0f %14.2f %14.2f\n", s.kind.c_str(), s.bytes, s.seconds * 1e6, s.fitted * 1e6);
  }
  const std::string toml = strata::to_toml(cal.machine);
  if (out.empty()) {
    std::printf("\n%s", toml.c_str());
  } else {
    std::ofstream os(out);
    os << toml;
    if (!os) throw strata::UserError("cannot write the machine file '" + out + "'");
    std::printf("strata: machine file %s written\n", out.c_str());
  }
  return strata::kExitOk;
}

// Post-processing runs on rank 0; other ranks (if any) just wait.
int run_inspect(int rank, const std::string& path) {
  if (rank != 0) return strata::kExitOk;
  return strata::inspect_checkpoint(path, std::cout) == 0 ? strata::kExitOk : 3;
}

int run_generate(int rank, const std::string& path, const strata::GenerateOptions& opts) {
  if (rank != 0) return strata::kExitOk;
  const auto tokens = strata::generate_tokens(path, opts);
  std::string text = opts.prompt;
  for (int32_t t : tokens) text += t < 256 ? std::string(1, char(t)) : "<" + std::to_string(t) + ">";
  std::cout << text << std::endl;
  return strata::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = strata::kExitOk;
  bool collective_error = true;  // set-up errors are seen by every rank alike
  bind_device_by_local_rank();
  {
    std::optional<Kokkos::ScopeGuard> kokkos;
    try {
      kokkos.emplace(argc, argv);
    } catch (const std::exception& e) {
      // e.g. a GPU build on a node without a usable GPU or driver
      const std::string why = e.what();
      std::fprintf(stderr, "strata: error: rank %d cannot initialise Kokkos (%s): %s\n", rank,
                   Kokkos::DefaultExecutionSpace::name(), why.substr(0, why.find('\n')).c_str());
      MPI_Abort(MPI_COMM_WORLD, strata::kExitUserError);
    }
    CLI::App app{"strata: 2D tensor, pipeline, layer-parallel and data-parallel training across MPI ranks"};
    app.set_version_flag("--version", "strata 0.1.0");
    app.require_subcommand(1);
    std::string deck_path;
    std::vector<std::string> overrides;
    std::string restart, checkpoint, trace;
    strata::GenerateOptions gen;
    auto* train = app.add_subcommand("train", "train the model a deck describes");
    train->add_option("deck", deck_path, "deck file (TOML)")->required();
    train->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
    train->add_option("--restart", restart,
                      "resume from a checkpoint file, or 'latest' (the newest in the run directory; "
                      "starts fresh if there is none)");
    train->add_option("--trace", trace,
                      "write a Chrome/Perfetto timeline (JSON) of every rank's compute and communication; "
                      "for short runs");
    PlanRequest plan_request;
    auto* plan = app.add_subcommand("plan", "print what a deck would run, without running it");
    plan->add_option("deck", deck_path, "deck file (TOML)")->required();
    plan->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
    plan->add_flag("--schedule", plan_request.schedule,
                   "the pipeline schedule: every stage's instructions and a unit-cost simulation of them");
    plan->add_option("--ranks", plan_request.ranks,
                     "predict every layout data x pipeline x tensor (1D, 2D) x schedule of N ranks and recommend one")
        ->check(CLI::PositiveNumber);
    plan->add_option("--machine", plan_request.machine, "machine file (strata calibrate; machines/*.toml)")
        ->capture_default_str();
    plan->add_option("--top", plan_request.top, "layouts to show, fastest first (0: all)")->capture_default_str();
    std::string machine_out, machine_name = "this machine";
    auto* calibrate = app.add_subcommand(
        "calibrate", "measure this machine's GEMM rate at a deck's shapes, memory bandwidth and MPI costs (alpha, "
                     "beta) and write a machine file for the planner; run with the ranks of one node");
    calibrate->add_option("deck", deck_path, "deck file (TOML): the model whose shapes to measure")->required();
    calibrate->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
    calibrate->add_option("--out", machine_out, "machine file to write (default: print it)");
    calibrate->add_option("--name", machine_name, "the machine's name in the file");
    auto* inspect = app.add_subcommand("inspect", "print a checkpoint's step, layout, deck and tensors, verifying checksums");
    inspect->add_option("checkpoint", checkpoint, "checkpoint file (.h5)")->required();
    auto* generate = app.add_subcommand("generate", "sample text from a trained GPT checkpoint");
    generate->add_option("checkpoint", checkpoint, "checkpoint file (.h5)")->required();
    generate->add_option("--prompt", gen.prompt, "text to continue");
    generate->add_option("--tokens", gen.tokens, "tokens to sample (default 200)");
    generate->add_option("--temperature", gen.temperature, "softmax temperature; 0 = greedy (default 1)");
    generate->add_option("--seed", gen.seed, "sampling seed (default 1)");
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (rank == 0) code = app.exit(e);
      else code = e.get_exit_code();
      if (code != 0) code = strata::kExitUserError;
      MPI_Finalize();
      return code;
    }
    try {
      if (*train) code = run_train(deck_path, overrides, restart, trace);
      if (*plan) code = run_plan(rank, deck_path, overrides, plan_request);
      if (*calibrate) code = run_calibrate(rank, deck_path, overrides, machine_out, machine_name);
      if (*inspect) code = run_inspect(rank, checkpoint);
      if (*generate) code = run_generate(rank, checkpoint, gen);
    } catch (const strata::UserError& e) {
      if (rank == 0) std::fprintf(stderr, "strata: error: %s\n", e.what());
      code = strata::kExitUserError;
    } catch (const std::exception& e) {
      // Past set-up an exception may be one rank's alone: report it and take the job down.
      std::fprintf(stderr, "strata: internal error on rank %d: %s\n", rank, e.what());
      collective_error = false;
      code = strata::kExitInternal;
    }
    if (!collective_error) {
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, code);
    }
  }
  MPI_Finalize();
  return code;
}
