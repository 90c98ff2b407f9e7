// strata: one SPMD executable.
//   strata train DECK [--set section.key=value ...] [--restart PATH|latest | --fresh] [--trace FILE]
//   strata plan DECK --schedule [--set section.key=value ...]
//   strata plan DECK --ranks N [--machine MACHINE.toml] [--top K] [--set ...]
//   strata calibrate DECK [--out MACHINE.toml] [--name NAME]   (with the ranks of one node)
//   strata inspect CKPT.h5
//   strata generate CKPT.h5 [--prompt TEXT] [--tokens N] [--temperature T] [--seed S] [--tokenizer M]
//   strata tokenize DECK [--set section.key=value ...]
//   strata export CKPT.h5 --format hf|llmc OUT [--dtype fp32|bf16]
//
// Exit codes (core/error.hpp, README "When things go wrong"): 0 success, also after a
// signal or run.max_walltime made training write a checkpoint and stop early; 1 internal
// error; 2 bad input (deck, data, layout, command line, checkpoint, run directory); 3
// `inspect` found tensors that fail their checksum; 4 an output could not be written
// (nothing was published); 5 the loss diverged; 128 + signal: a rank ended without a
// checkpoint after a second signal or run.stop_timeout. An error that all ranks agree on
// is printed once by rank 0; one that a rank sees alone after set-up is printed by that
// rank and aborts the whole job (MPI_Abort) rather than leaving the others waiting.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <hdf5.h>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include <iostream>

#include "core/deck.hpp"
#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "plan/memory_fit.hpp"
#include "plan/calibrate.hpp"
#include "plan/machine_file.hpp"
#include "plan/plan_report.hpp"
#include "cli/export_model.hpp"
#include "cli/generate.hpp"
#include "checkpoint/inspect_checkpoint.hpp"
#include "comm/nccl_comm.hpp"
#include "core/blas_kernels.hpp"
#include "kernels/matmul_bf16.hpp"
#include "strata_version.hpp"
#include "cli/plan_schedule.hpp"
#include "train/stop_signals.hpp"
#include "cli/tokenize.hpp"
#include "train/run_loop.hpp"
#include "train/training_job.hpp"

namespace {

#if defined(KOKKOS_ENABLE_CUDA)
// One GPU per rank, chosen by the rank's index on its node, unless the user chose
// (KOKKOS_DEVICE_ID / KOKKOS_NUM_DEVICES, which Kokkos reads at initialisation).
void bind_device_by_local_rank() {
  if (std::getenv("KOKKOS_DEVICE_ID") || std::getenv("KOKKOS_NUM_DEVICES")) return;
  const int local = strata::node_share(MPI_COMM_WORLD).local_rank;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return;  // Kokkos reports it
  setenv("KOKKOS_DEVICE_ID", std::to_string(local % devices).c_str(), 1);
}
#else
void bind_device_by_local_rank() {}
#endif

// The memory one rank's share may use and how many ranks share it: one GPU (CUDA builds)
// or the node's physical memory.
std::pair<int64_t, int> memory_capacity() {
  const int on_node = strata::node_share(MPI_COMM_WORLD).local_size;
#if defined(KOKKOS_ENABLE_CUDA)
  size_t free = 0, total = 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || cudaMemGetInfo(&free, &total) != cudaSuccess)
    return {0, 1};
  return {int64_t(total), (on_node + devices - 1) / devices};
#else
  return {int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE)), on_node};
#endif
}

int run_train(const std::string& deck_path, const std::vector<std::string>& overrides, const strata::TrainOptions& opts) {
  // Every rank reads and validates the deck, and checks that the model fits in memory,
  // before anything is allocated; the outcome is agreed, so a deck one node cannot read
  // ends every rank with one message.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto [capacity, sharers] = memory_capacity();
  strata::Deck deck;
  strata::agreed(MPI_COMM_WORLD, [&] {
    deck = strata::load_deck(deck_path, overrides);
    strata::check_fits_in_memory(deck, capacity, sharers);
  });
  strata::install_stop_signal_handlers(rank);
  strata::TrainingJob job(deck, MPI_COMM_WORLD, opts.job);
  strata::RunLoop(deck, opts, job).run();
  return strata::kExitOk;
}

// An exception's text on one line (Kokkos' allocation failures span several).
std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The shipped machine files: beside an installed strata (PREFIX/share/strata/machines, found
// from the executable's own path), else in the source tree it was built from.
std::string machines_dir() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string exe(self, size_t(n));
    const std::string installed = exe.substr(0, exe.rfind('/')) + "/../share/strata/machines";
    if (::access(installed.c_str(), R_OK) == 0) return installed;
  }
  return STRATA_MACHINES_DIR;
}

struct PlanRequest {
  bool schedule = false;
  int ranks = 0, top = 20;
  std::string machine = machines_dir() + "/debian-2core-vm.toml";
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
                                     "parallel.tensor_cols=1", "parallel.micro_batches=1", "parallel.expert=1"};
  serial.insert(serial.end(), overrides.begin(), overrides.end());
  const strata::Deck deck = strata::load_deck(deck_path, serial);
  if (deck.model.kind != strata::ModelKind::GPT) throw strata::UserError("strata plan --ranks: plans GPT decks (model.kind = \"gpt\")");
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
  return strata::inspect_checkpoint(path, std::cout) == 0 ? strata::kExitOk : strata::kExitChecksum;
}

int run_generate(int rank, const std::string& path, const strata::GenerateOptions& opts) {
  if (rank != 0) return strata::kExitOk;
  std::cout << strata::generate_text(path, opts) << std::endl;
  return strata::kExitOk;
}

int run_export(int rank, const std::string& path, const strata::ExportOptions& opts) {
  if (rank != 0) return strata::kExitOk;
  std::printf("%s\n", strata::export_model(path, opts).c_str());
  return strata::kExitOk;
}

// strata tokenize: the corpus as token shards.
int run_tokenize(const std::string& deck_path, const std::vector<std::string>& overrides) {
  strata::Deck deck;
  strata::agreed(MPI_COMM_WORLD, [&] { deck = strata::load_deck(deck_path, overrides); });
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const strata::Log log(rank);
  const auto r = strata::tokenize_corpus(deck, MPI_COMM_WORLD, log);
  if (r.shards_not_reproduced > 0)
    log.warn(strata::strfmt("%lld of %lld shards do not decode back to their text exactly: the tokenizer normalizes "
                            "text (bits per byte count the decoded text)",
                            (long long)r.shards_not_reproduced, (long long)r.shards));
  log.info(strata::strfmt("strata tokenize: %lld files, %lld bytes of text -> %lld tokens (%.3f bytes/token) in %lld "
                          "shard%s; vocabulary %lld%s; encoded in %.1f s on %d rank%s; wrote %s",
                          (long long)r.files, (long long)r.text_bytes, (long long)r.tokens,
                          double(r.text_bytes) / double(std::max<int64_t>(r.tokens, 1)), (long long)r.shards,
                          r.shards == 1 ? "" : "s", (long long)r.vocab,
                          deck.data.tokenizer.empty() ? strata::strfmt(" (trained in %.1f s)", r.train_seconds).c_str() : "",
                          r.encode_seconds, ranks, ranks == 1 ? "" : "s", deck.data.token_dir.c_str()));
  return strata::kExitOk;
}

// strata deck: the resolved deck, or the reference of every key.
int run_deck(int rank, const std::string& path, const std::vector<std::string>& overrides, bool reference) {
  if (reference == !path.empty())
    throw strata::UserError("strata deck: give a deck file, or --reference (not both)");
  const std::string text = reference ? strata::deck_reference() : strata::load_deck(path, overrides).resolved_toml;
  if (rank == 0) std::cout << text << std::flush;
  return strata::kExitOk;
}

// Kokkos' execution spaces compiled into this build, the default first.
std::string kokkos_backends() {
  std::string all = Kokkos::DefaultExecutionSpace::name();
  const auto add = [&](const char* name) {
    if (all.find(name) == std::string::npos) all += std::string("+") + name;
  };
#ifdef KOKKOS_ENABLE_CUDA
  add("Cuda");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  add("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_THREADS
  add("Threads");
#endif
#ifdef KOKKOS_ENABLE_SERIAL
  add("Serial");
#endif
  return all;
}

// `strata --version`: the version, the git commit it was built from, the build type, and
// what runs its kernels (Kokkos' backends, BLAS, the bf16 products' library).
std::string version_text() {
  const bool cuda = strata::nccl_available();
  std::string build = std::string(cuda ? "CUDA build (cuBLAS, NCCL)" : "CPU build") + " " + STRATA_BUILD_TYPE +
                      ", Kokkos " + std::to_string(KOKKOS_VERSION / 10000) + "." +
                      std::to_string(KOKKOS_VERSION / 100 % 100) + "." + std::to_string(KOKKOS_VERSION % 100) + " " +
                      kokkos_backends();
  if (!cuda) {
    const std::string core = strata::blas_core_name();
    build += ", BLAS " + std::string(core.empty() ? "(not OpenBLAS)" : "OpenBLAS " + core + " kernels");
  }
  build += ", bf16 products: " + strata::kernels::bf16_products_library();
  return std::string("strata ") + STRATA_VERSION + " (git " + STRATA_GIT_COMMIT + "; " + build + ")";
}

// Kokkos prints its own options for --help and -h: it gets the command line without them,
// so that --help is strata's (--kokkos-help lists Kokkos').
std::vector<char*> without_help(int argc, char** argv) {
  std::vector<char*> out;
  for (int i = 0; i < argc; ++i)
    if (std::string(argv[i]) != "--help" && std::string(argv[i]) != "-h") out.push_back(argv[i]);
  out.push_back(nullptr);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // HDF5's exit-time clean-up closes open files with collective MPI-IO calls; in a job
  // that is being aborted (a failed checkpoint write on another rank) that runs inside
  // MPI's progress engine and crashes it. strata closes its files itself.
  H5dont_atexit();
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = strata::kExitOk;
  bool collective_error = true;  // set-up errors are seen by every rank alike
  bind_device_by_local_rank();
  {
    std::optional<Kokkos::ScopeGuard> kokkos;
    std::vector<char*> kokkos_argv = without_help(argc, argv);
    int kokkos_argc = int(kokkos_argv.size()) - 1;
    bool kokkos_help = false;
    for (int i = 1; i < argc; ++i) kokkos_help = kokkos_help || std::string(argv[i]) == "--kokkos-help";
    try {
      kokkos.emplace(kokkos_argc, kokkos_argv.data());
    } catch (const std::exception& e) {
      // e.g. a GPU build on a node without a usable GPU or driver
      const std::string why = e.what();
      std::fprintf(stderr, "strata: error: rank %d cannot initialise Kokkos (%s): %s\n", rank,
                   Kokkos::DefaultExecutionSpace::name(), why.substr(0, why.find('\n')).c_str());
      MPI_Abort(MPI_COMM_WORLD, strata::kExitUserError);
    }
    if (kokkos_help) {  // Kokkos printed its options
      kokkos.reset();
      MPI_Finalize();
      return strata::kExitOk;
    }
    // CLI11 parses what Kokkos left (its --kokkos-* options removed), help included, in order
    const std::set<char*> left(kokkos_argv.begin(), kokkos_argv.begin() + kokkos_argc);
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i)
      if (left.count(argv[i]) || std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") args.push_back(argv[i]);
    CLI::App app{"strata: 2D tensor, pipeline, layer-parallel and data-parallel training across MPI ranks"};
    app.set_version_flag("--version", version_text());
    app.require_subcommand(1);
    const std::string kokkos_line =
        "Kokkos' options (--kokkos-threads, --kokkos-device-id, ...) are accepted too: strata --kokkos-help "
        "lists them.\nExit codes: 0 done (also a stop with a checkpoint), 1 internal error, 2 bad input, 3 corrupt "
        "checkpoint (inspect), 4 an output could not be written, 5 diverged, 128 + signal ended without a checkpoint.";
    app.footer(kokkos_line);
    std::string deck_path;
    std::vector<std::string> overrides;
    std::string checkpoint;
    strata::TrainOptions train_opts;
    strata::GenerateOptions gen;
    auto* train = app.add_subcommand("train", "train the model a deck describes");
    train->add_option("deck", deck_path, "deck file (TOML)")->required();
    train->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
    train->add_option("--restart", train_opts.restart,
                      "resume from a checkpoint file, or 'latest' (what the run directory's LATEST names, or its "
                      "newest checkpoint that checks out; starts fresh if there is none)");
    train->add_flag("--fresh", train_opts.fresh,
                    "start from step 0 although the run directory has checkpoints (they are moved aside, "
                    "not deleted)");
    train->add_option("--trace", train_opts.trace,
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
    bool reference = false;
    auto* deck_cmd = app.add_subcommand(
        "deck", "check a deck and print it resolved (defaults and --set applied), or print the reference of every key");
    deck_cmd->add_option("deck", deck_path, "deck file (TOML)");
    deck_cmd->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
    deck_cmd->add_flag("--reference", reference,
                       "print every key's type, default, allowed values and meaning (Markdown; docs/deck.md)");
    auto* inspect = app.add_subcommand("inspect", "print a checkpoint's step, layout, deck and tensors, verifying checksums");
    inspect->add_option("checkpoint", checkpoint, "checkpoint file (.h5)")->required();
    auto* generate = app.add_subcommand("generate", "sample text from a trained GPT checkpoint");
    generate->add_option("checkpoint", checkpoint, "checkpoint file (.h5)")->required();
    generate->add_option("--prompt", gen.prompt, "text to continue");
    generate->add_option("--tokens", gen.tokens, "tokens to sample (default 200)");
    generate->add_option("--temperature", gen.temperature, "softmax temperature; 0 = greedy (default 1)");
    generate->add_option("--seed", gen.seed, "sampling seed (default 1)");
    generate->add_option("--tokenizer", gen.tokenizer,
                         "SentencePiece model to encode the prompt and decode with (default: the one the checkpoint's "
                         "deck names)");
    strata::ExportOptions export_opts;
    auto* export_cmd = app.add_subcommand(
        "export", "write a GPT checkpoint as a Hugging Face GPT-2 folder (config.json, model.safetensors) or an llm.c "
                  "model file (docs/interop.md)");
    export_cmd->add_option("checkpoint", checkpoint, "checkpoint file (.h5)")->required();
    export_cmd->add_option("out", export_opts.out, "the folder (hf) or file (llmc) to write; must not exist, or be "
                                                   "an empty folder")->required();
    export_cmd->add_option("--format", export_opts.format, "hf (Hugging Face GPT2LMHeadModel) or llmc (llm.c's "
                                                           "gpt2_*.bin)")->required();
    export_cmd->add_option("--dtype", export_opts.dtype, "fp32 (default) or bf16 (rounded to nearest even)");
    auto* tokenize = app.add_subcommand(
        "tokenize", "train a SentencePiece tokenizer on a deck's data.files (or use data.tokenizer) and write the "
                    "corpus as token shards into data.token_dir, for data.kind = \"tokens\"; any number of ranks");
    tokenize->add_option("deck", deck_path, "deck file (TOML)")->required();
    tokenize->add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
    for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) sub->footer(kokkos_line);
    try {
      app.parse(int(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
      if (rank == 0) code = app.exit(e);
      else code = e.get_exit_code();
      if (code != 0) code = strata::kExitUserError;
      MPI_Finalize();
      return code;
    }
    try {
      if (*train) code = run_train(deck_path, overrides, train_opts);
      if (*plan) code = run_plan(rank, deck_path, overrides, plan_request);
      if (*calibrate) code = run_calibrate(rank, deck_path, overrides, machine_out, machine_name);
      if (*deck_cmd) code = run_deck(rank, deck_path, overrides, reference);
      if (*inspect) code = run_inspect(rank, checkpoint);
      if (*generate) code = run_generate(rank, checkpoint, gen);
      if (*tokenize) code = run_tokenize(deck_path, overrides);
      if (*export_cmd) code = run_export(rank, checkpoint, export_opts);
    } catch (const strata::StrataError& e) {
      // Agreed errors (and every error of the sub-commands that are not training runs,
      // which all ranks see alike) are printed once; an error only this rank saw after
      // the training's set-up ends the job.
      code = e.exit_code();
      if (e.agreed() || !*train) {
        if (rank == 0) std::fprintf(stderr, "strata: error: %s\n", one_line(e.what()).c_str());
      } else {
        std::fprintf(stderr, "strata: error: rank %d: %s\n", rank, one_line(e.what()).c_str());
        collective_error = false;
      }
    } catch (const std::exception& e) {
      // Past set-up an exception may be one rank's alone: report it and take the job down.
      std::fprintf(stderr, "strata: error: rank %d: internal error: %s\n", rank, one_line(e.what()).c_str());
      collective_error = false;
      code = strata::kExitInternal;
    }
    if (!collective_error) strata::abort_job(MPI_COMM_WORLD, code);
  }
  MPI_Finalize();
  return code;
}
