#pragma once
// Collective agreement on failure: every rank calls agree_on_error after a phase that may
// fail on some ranks only. If any rank failed, all ranks throw the same error (the lowest
// failing rank's message), so the job ends cleanly with one message instead of leaving
// the healthy ranks waiting in the next collective.
#include <mpi.h>

#include <exception>

namespace strata {

// Rethrows on every rank if any rank passed a non-null error. User errors stay user
// errors (exit code 2); others become internal errors.
void agree_on_error(MPI_Comm comm, std::exception_ptr local_error);

}  // namespace strata
