// strata: one SPMD executable, `strata SUBCOMMAND ...` (train, plan, calibrate, deck,
// inspect, generate, tokenize, export: `strata --help` and the README say what each takes).
// Each sub-command lives in src/cli (cli/command.hpp); this file starts MPI and Kokkos,
// parses, runs the one given, and turns errors into exit codes.
//
// Exit codes (core/error.hpp, README "When things go wrong"): 0 success, also after a
// signal or run.max_walltime made training write a checkpoint and stop early; 1 internal
// error; 2 bad input (deck, data, layout, command line, checkpoint, run directory); 3
// `inspect` found tensors that fail their checksum; 4 an output could not be written
// (nothing was published); 5 the loss diverged; 128 + signal: a rank ended without a
// checkpoint after a second signal or run.stop_timeout. An error that all ranks agree on
// is printed once by rank 0; one that a rank sees alone after set-up is printed by that
// rank and aborts the whole job (MPI_Abort) rather than leaving the others waiting.
#include <hdf5.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "cli/build_info.hpp"
#include "cli/command.hpp"
#include "cli/kokkos_start.hpp"
#include "comm/agree.hpp"
#include "comm/connect_all.hpp"
#include "core/blas_library.hpp"
#include "core/error.hpp"
#include "core/exit_deadline.hpp"
#include "core/process_exit.hpp"

namespace {

// MPI_Finalize takes well under a second; past this it is waiting on a peer that has left
constexpr double kFinalizeSeconds = 30;

// An exception's text on one line (Kokkos' allocation failures span several).
std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS's oldest kernels on a CPU it does not know: start again with the CPU's own
  // (core/blas_library.hpp), before any thread or MPI exists
  if (const std::string core = strata::better_blas_core(); !core.empty()) strata::restart_with_blas_core(core, argv);
  // the launcher's signals reach one thread of this rank, started before any other
  // (core/process_exit.hpp): MPI's, OpenMP's and the watchdog's threads inherit the mask
  strata::start_signal_thread();
  // HDF5's exit-time clean-up closes open files with collective MPI-IO calls; in a job
  // that is being aborted (a failed checkpoint write on another rank) that runs inside
  // MPI's progress engine and crashes it. strata closes its files itself.
  H5dont_atexit();
  // a rank's OpenMP threads (Kokkos, OpenBLAS, oneDNN) compute; only the thread that
  // started MPI calls it
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  strata::set_rank_end(strata::abort_world);  // a rank ending on purpose aborts the job with its code
  if (provided < MPI_THREAD_FUNNELED) {
    if (rank == 0) std::fprintf(stderr, "strata: error: this MPI library does not support MPI_THREAD_FUNNELED\n");
    MPI_Finalize();
    return strata::kExitUserError;
  }
  strata::connect_all_pairs(MPI_COMM_WORLD);  // not first at the last checkpoint (comm/connect_all.hpp)
  int code = strata::kExitOk;
  {
    strata::KokkosStart kokkos(argc, argv, rank);
    CLI::App app{"strata: 2D tensor, pipeline, layer-parallel and data-parallel training across MPI ranks"};
    app.set_version_flag("--version", strata::version_text());
    app.require_subcommand(1);
    app.footer(strata::kHelpFooter);
    auto commands = strata::strata_commands();
    std::vector<CLI::App*> subs;
    for (auto& c : commands) subs.push_back(c->add_to(app));
    for (auto* sub : subs) sub->footer(strata::kHelpFooter);
    if (!kokkos.error().empty()) {  // the same command line on every rank: every rank ends
      if (rank == 0) std::fprintf(stderr, "strata: error: %s\n", kokkos.error().c_str());
      code = strata::kExitUserError;
      subs.clear();
    } else if (kokkos.printed_help()) {
      // Kokkos printed its options
    } else {
      try {
        app.parse(int(kokkos.args().size()), kokkos.args().data());
      } catch (const CLI::ParseError& e) {
        code = rank == 0 ? app.exit(e) : e.get_exit_code();
        if (code != 0) code = strata::kExitUserError;
        subs.clear();
      }
    }
    for (size_t i = 0; i < subs.size(); ++i) {
      if (!*subs[i]) continue;
      bool rank_alone = false;  // an error only this rank saw, after set-up: it ends the job
      try {
        code = commands[i]->run(rank);
      } catch (const strata::StrataError& e) {
        // agreed errors, and every error of a sub-command whose ranks all see the same,
        // are printed once
        code = e.exit_code();
        rank_alone = !e.agreed() && commands[i]->rank_local_errors();
        if (rank_alone)
          std::fprintf(stderr, "strata: error: rank %d: %s\n", rank, one_line(e.what()).c_str());
        else if (rank == 0)
          std::fprintf(stderr, "strata: error: %s\n", one_line(e.what()).c_str());
      } catch (const std::exception& e) {
        // past set-up an exception may be one rank's alone: report it and take the job down
        const std::string memory = strata::out_of_memory_text(e);
        std::fprintf(stderr, "strata: error: rank %d: %s\n", rank,
                     memory.empty() ? ("internal error: " + one_line(e.what())).c_str() : memory.c_str());
        code = memory.empty() ? strata::kExitInternal : strata::kExitOutOfMemory;
        rank_alone = true;
      }
      if (rank_alone) strata::abort_job(MPI_COMM_WORLD, code);
    }
  }
  strata::set_rank_end(nullptr);  // (from MPI_Finalize on, an exit on purpose is an _exit)
  {
    const strata::ExitDeadline deadline(kFinalizeSeconds, rank, code);
    MPI_Finalize();
  }
  return code;
}
