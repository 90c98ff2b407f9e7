#pragma once
// Every pair of ranks connected at start, not first at the end.
//
// MPICH (ch4:ucx, UCX 1.13) makes a pair's connection when the pair first talks. The
// checkpoint's collective MPI-IO is the first time many pairs talk (ROMIO's two-phase
// write exchanges offsets all-to-all), and the last checkpoint is written just before
// MPI_Finalize. Across nodes (TCP), a pair connected that late could still be finishing
// its handshake when its ranks reached MPI_Finalize: one rank then waited there for a peer
// that had gone on into the launcher's final barrier, until strata's deadline ended the
// job (core/exit_deadline.hpp). On the two-node test cluster that was 14 of 140 runs of
// tests/jobscripts/tiny-gpt.toml on 2 x 2 ranks; with every pair connected at start, 0 of
// 270 (jobscripts/README.md). The checkpoint connects every pair anyway, so this adds no
// connection a training run would not make; it moves them to the start.
#include <mpi.h>

namespace strata {

// Collective over comm: one int from every rank to every other (MPI_Alltoall).
void connect_all_pairs(MPI_Comm comm);

}  // namespace strata
