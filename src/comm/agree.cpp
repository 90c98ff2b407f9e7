#include "comm/agree.hpp"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "core/process_exit.hpp"

namespace strata {

void agree_on_error(MPI_Comm comm, std::exception_ptr local_error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::string message;
  int code = kExitOk;
  if (local_error) {
    try {
      std::rethrow_exception(local_error);
    } catch (const StrataError& e) {
      message = e.what();
      code = e.exit_code();
    } catch (const std::exception& e) {
      message = out_of_memory_text(e);
      code = message.empty() ? kExitInternal : kExitOutOfMemory;
      if (message.empty()) message = e.what();
    } catch (...) {
      message = "unknown error";
      code = kExitInternal;
    }
  }
  int mine = local_error ? rank : size, first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  int len = int(message.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  MPI_Bcast(&code, 1, MPI_INT, first, comm);
  message.resize(size_t(len));
  MPI_Bcast(message.data(), len, MPI_CHAR, first, comm);
  throw_error(code, message, true);
}

void agreed(MPI_Comm comm, const std::function<void()>& phase) {
  std::exception_ptr err;
  try {
    phase();
  } catch (...) {
    err = std::current_exception();
  }
  agree_on_error(comm, err);
}

void abort_job(MPI_Comm comm, int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Rank 0 aborts first, the others 0.4 s later: when several ranks fail at once (a
  // checkpoint's fsync failing everywhere), MPICH's mpiexec that received two aborts
  // together was seen to return 1 instead of their code (once, in a full test run); the
  // launcher ends the later ranks while they wait, so it reports one abort's code. (The
  // gap was 1 s until 2026-12-08: one rank's error then cost every job 1.3 s.)
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  ::usleep(rank == 0 ? 100 * 1000 : 500 * 1000);
  claim_exit();  // the job's code is this one, not a launcher signal's (core/process_exit.hpp)
  abort_world(exit_code);
}

void abort_world(int exit_code) {
  std::fflush(stderr);
  wait_for_stderr_read(1000);  // the rank's last line reaches the job's stderr first
  // On MPI_COMM_WORLD, MPICH's abort goes to the launcher, which returns its code whatever
  // the other ranks do (30 of 30 runs); on another communicator the rank only exits with
  // it, and mpiexec reports whichever rank it sees end first: 2 faults runs in 40 returned
  // 1 there, a waiting rank's status. The whole job ends either way.
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  ::_exit(exit_code);  // MPI_Abort does not return; should it, the rank still ends
}

}  // namespace strata
