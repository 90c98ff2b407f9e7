#pragma once
// Collective agreement on failure: every rank calls agree_on_error after a phase that may
// fail on some ranks only. If any rank failed, all ranks throw the same error (the lowest
// failing rank's message and exit code, marked agreed), so the job ends cleanly with one
// message instead of leaving the healthy ranks waiting in the next collective.
#include <mpi.h>

#include <exception>
#include <functional>

namespace strata {

// Rethrows on every rank if any rank passed a non-null error. StrataErrors keep their
// class and exit code; anything else becomes an internal error (exit code 1).
void agree_on_error(MPI_Comm comm, std::exception_ptr local_error);

// Runs phase() on every rank and agrees on its outcome: agree_on_error(comm, what it threw).
void agreed(MPI_Comm comm, const std::function<void()>& phase);

// The other way a failure ends every rank, when no agreement can be reached (the others
// wait in a collective): flushes this rank's output, waits a moment so that the launcher
// forwards it (seen here: MPICH's mpiexec dropped an aborting rank's last line about one
// time in three without the wait), then MPI_Abort(comm, exit_code). Ranks other than 0
// wait a second longer, so that ranks failing together do not abort at the same moment
// (mpiexec then reported exit 1 instead of their code), and the launcher's terminating
// signals are ignored before the abort (core/process_exit.hpp).
[[noreturn]] void abort_job(MPI_Comm comm, int exit_code);
// MPI_Abort on MPI_COMM_WORLD with exit_code, at once: how a rank that has claimed its exit
// (core/process_exit.hpp) ends while MPI runs (set_rank_end); MPICH's launcher returns the
// code. (It may be called from a thread other than MPI's: the process is ending.)
[[noreturn]] void abort_world(int exit_code);

}  // namespace strata
