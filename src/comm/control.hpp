#pragma once
// The run's control traffic: small collectives on a raw communicator that are not part
// of training's communication (so not counted by Comm): agreeing on a value, a string
// from one rank, every rank's string, timers' maxima, the ranks sharing a node, and the
// stop votes XPipe posts in flight. With comm.hpp and grid.hpp, the only code that calls
// MPI's communication functions (the layer rule of docs/design.md; tests/scripts/check_layers.py).
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

int max_over(MPI_Comm comm, int x);
double max_over(MPI_Comm comm, double x);
int min_over(MPI_Comm comm, int x);
// element-wise, in place
void max_over(MPI_Comm comm, std::vector<double>& xs);
void sum_over(MPI_Comm comm, std::vector<int64_t>& xs);
void sum_over(MPI_Comm comm, std::vector<double>& xs);
// root's x on every rank
double broadcast_value(MPI_Comm comm, double x, int root = 0);

// root's s on every rank
void broadcast_string(MPI_Comm comm, std::string& s, int root = 0);
// every rank's string, in rank order: on root only (gather) or on every rank (allgather)
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root = 0);
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);

void barrier(MPI_Comm comm);
// A barrier that leaves the core free while it waits (it sleeps between tests, where MPI's
// own polls): for benchmarks that time one rank while the others wait, on a machine with
// fewer cores than ranks.
void idle_barrier(MPI_Comm comm);

// A new communicator of comm's ranks 0 .. n-1 (MPI_COMM_NULL on the others), for the
// benchmarks that time a job on a growing share of the ranks; free it with free_ranks.
// Collective over comm. (A run's communicators are Grid's.)
MPI_Comm first_ranks(MPI_Comm comm, int n);
void free_ranks(MPI_Comm& comm);

// This rank's index among the ranks of comm on its node, and their number.
struct NodeShare {
  int local_rank = 0, local_size = 1;
};
NodeShare node_share(MPI_Comm comm);

// Votes posted without waiting, one per slot, each the maximum over comm of the ranks'
// flags, read later (XPipe's in-stream stop agreement, schedule.hpp). Every rank must
// post every slot it reads, in the same order; finish() completes the ones not read.
class StopVotes {
 public:
  StopVotes() = default;
  StopVotes(MPI_Comm comm, int slots);
  StopVotes(const StopVotes&) = delete;
  StopVotes& operator=(const StopVotes&) = delete;
  StopVotes(StopVotes&&) = default;
  StopVotes& operator=(StopVotes&&) = default;
  ~StopVotes();
  void post(int slot, bool stop);
  bool result(int slot);  // waits for the slot's vote
  void finish();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> flags_;
  std::vector<MPI_Request> requests_;
};

}  // namespace strata
