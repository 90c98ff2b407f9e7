#pragma once
// How many threads a rank runs, chosen once at start and before Kokkos starts, and applied
// to everything that threads: Kokkos' OpenMP host space, OpenBLAS (its OpenMP build) and
// oneDNN, which share OpenMP's one pool. In order:
//   --threads N            on the command line (taken out before the sub-command parses);
//   OMP_NUM_THREADS        (its first value), as a batch script sets it;
//   the CPUs the launcher gave the rank: its affinity mask when the launcher binds ranks
//   (Slurm's --cpus-per-task, mpiexec -bind-to), else the node's CPUs divided among the
//   node's ranks (at least one each).
// CUDA builds run their host work on one thread.
#include <string>
#include <vector>

namespace strata {

struct ThreadChoice {
  int count = 1;
  std::string why;  // where the count came from, for the run summary
};

// args: the command line; "--threads N" and "--threads=N" are removed from it. A value that
// is not a whole number >= 1, or Kokkos' own thread options, is a UserError. ranks_on_node:
// the ranks that share this rank's node.
ThreadChoice choose_threads(std::vector<char*>& args, int ranks_on_node);

// Sets OpenMP's and OpenBLAS's thread counts (Kokkos takes its own at initialisation) and
// keeps the choice.
void apply_threads(const ThreadChoice& choice);

// The choice, for the run summary ("2 threads (--threads)").
const ThreadChoice& chosen_threads();

}  // namespace strata
