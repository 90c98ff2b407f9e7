// strata train DECK [--set ...] [--restart PATH|latest | --fresh] [--trace FILE] [--inject-fault SPEC]
#include <unistd.h>

#include <Kokkos_Core.hpp>

#include "cli/command.hpp"
#include "cli/thread_choice.hpp"
#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "model/model_kind.hpp"
#include "plan/memory_fit.hpp"
#include "train/run_loop.hpp"
#include "train/stop_signals.hpp"
#include "train/stop_watchdog.hpp"
#include "train/train_job.hpp"

namespace strata {
namespace {

// The memory a rank may use: one GPU's (CUDA builds), or the node's physical memory (or its
// memory cgroup's limit, if tighter: Slurm's --mem) shared by the node's ranks, and the
// process's own limits (ulimit -d, -v).
MemoryCapacity memory_capacity() {
  MemoryCapacity c;
  const int on_node = node_share(MPI_COMM_WORLD).local_size;
#if defined(KOKKOS_ENABLE_CUDA)
  size_t free = 0, total = 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    c.node_bytes = int64_t(total);
    c.sharers = (on_node + devices - 1) / devices;
    c.node_source = "one GPU";
  }
#else
  c.node_bytes = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
  c.sharers = on_node;
  c.node_source = "the node's memory";
  const MemoryLimit cgroup = cgroup_memory_limit();
  if (cgroup.bytes > 0 && cgroup.bytes < c.node_bytes) {
    c.node_bytes = cgroup.bytes;
    c.node_source = cgroup.source;
  }
#endif
  const MemoryLimit own = process_memory_limit();
  c.rank_bytes = own.bytes;
  c.rank_source = own.source;
  return c;
}

class TrainCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand("train", "train the model a deck describes");
    deck_.add_to(*sub);
    sub->add_option("--restart", opts_.restart,
                    "resume from a checkpoint file, or 'latest' (what the run directory's LATEST names, or its "
                    "newest checkpoint that checks out; starts fresh if there is none)");
    sub->add_flag("--fresh", opts_.fresh,
                  "start from step 0 although the run directory has checkpoints (they are moved aside, "
                  "not deleted)");
    sub->add_option("--inject-fault", fault_specs_,
                    "make the run fail on purpose, to rehearse a failure: error:STEP:RANK, hang:STEP:RANK or "
                    "pause-checkpoint:STEP (docs/checkpoints.md)");
    sub->add_option("--trace", opts_.trace,
                    "write a Chrome/Perfetto timeline (JSON) of every rank's compute and communication; "
                    "for short runs");
    return sub;
  }

  // Every rank reads and validates the deck, and checks that the model fits in memory,
  // before anything is allocated; the outcome is agreed, so a deck one node cannot read
  // ends every rank with one message.
  int run(int rank) override {
    install_stop_signal_handlers(rank);  // first: a stop asked during the set-up is a stop request too
    const MemoryCapacity memory = memory_capacity();
    Deck deck;
    agreed(MPI_COMM_WORLD, [&] {
      deck = load_model_deck(deck_.path, deck_.overrides);
      check_fits_in_memory(deck, memory);
      opts_.faults = FaultInjection::parse(fault_specs_);
    });
    opts_.job.threads_origin = chosen_threads().why;
    // A stop asked while the job is built and set up (the model, the BLAS library's buffers,
    // the data, a checkpoint read) is taken up at the first step; a rank stuck there (OpenBLAS
    // retried an allocation under a memory limit for ever; a stalled file system) ends after
    // run.stop_timeout like one stuck in a step.
    StopWatchdog watchdog(deck.run.stop_timeout, rank);
    opts_.faults.before_step(0, rank);  // "hang:0:R": stuck in the set-up
    TrainJob job(deck, MPI_COMM_WORLD, opts_.job);
    RunLoop(deck, opts_, job, &watchdog).run();
    return kExitOk;
  }

  bool rank_local_errors() const override { return true; }

 private:
  DeckArgs deck_;
  TrainOptions opts_;
  std::vector<std::string> fault_specs_;
};

}  // namespace

std::unique_ptr<Command> train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace strata
