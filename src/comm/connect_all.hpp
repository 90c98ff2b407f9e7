#pragma once
// Every pair of ranks connected at start, not first at the end.
//
// MPICH (ch4:ucx, UCX 1.13) makes a pair's connection when the pair first talks. The
// checkpoint's collective MPI-IO is the first time many pairs talk (ROMIO's two-phase
// write exchanges offsets all-to-all), and the last checkpoint is written just before
// MPI_Finalize. Across nodes (TCP), a pair connected that late (what was seen fits this)
// could still be finishing its handshake at MPI_Finalize: one rank then waited there for a peer
// that had gone on into the launcher's final barrier, until strata's deadline ended the
// job (core/exit_deadline.hpp). On the two-node test cluster that was 20 of 180 runs of
// tests/jobscripts/tiny-gpt.toml on 2 x 2 ranks; with every pair connected at start, 0 of
// 350 (jobscripts/README.md).
//
// The cost: one int each way per pair at start, and every pair's connection held for the
// run (an endpoint each; over TCP a socket each). Up to kConnectAllMostRanks ranks; above
// that nothing is done, and a job keeps the library's own way of connecting.
#include <mpi.h>

namespace strata {

constexpr int kConnectAllMostRanks = 256;

// Collective over comm: every rank sends one int to every other and receives theirs.
void connect_all_pairs(MPI_Comm comm);

}  // namespace strata
