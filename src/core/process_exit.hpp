#pragma once
// The launcher's signals and the rank's ways out.
//
// A rank has many threads (OpenMP's workers, the stop watchdog, MPI's and the libraries'),
// and a process-directed signal (mpiexec's or srun's SIGTERM, SIGINT, SIGUSR1, SIGHUP) is
// delivered to any thread that does not block it. So strata blocks those signals in the
// main thread before any other thread exists (every thread inherits the mask), and one
// thread, the signal thread, takes them with sigwait and acts on them in ordinary code, not
// in a handler: by default as the signal's default action would (the process ends by the
// signal), in `strata train` as a stop request (train/stop_signals.hpp).
//
// Ending a rank on purpose with a code of its own (a second stop signal, the stop watchdog,
// an error no agreement can reach, MPI_Finalize past its deadline) goes through
// claim_exit: the first thread to claim the exit takes it, every later one (the signal
// thread with a launcher's signal among them) waits until the process is gone. MPICH's
// launcher reports the wait status of the rank that ends first and SIGKILLs the others
// (recorded as 0), so a rank that had printed its line and was killed by a SIGHUP on its
// way to _exit made the job return 1 instead of its code; that window is now closed in
// every thread. SIGKILL cannot be blocked.

namespace strata {

// Blocks SIGHUP, SIGINT, SIGTERM and SIGUSR1 in the calling thread and starts the signal
// thread. Call first thing in main, before any other thread is started. Idempotent.
void start_signal_thread();

// What the signal thread does with each of those signals from now on (nullptr: their
// default action). Runs in the signal thread, one signal at a time; it may print, lock and
// exit (through claim_exit).
void on_terminating_signal(void (*action)(int sig));

// The one exit on purpose: the first caller returns (the launcher's signals are ignored
// from here on, for processes without the signal thread); a later caller, in any thread,
// waits until the process has ended. Then print the line and _exit.
void claim_exit();

// How a rank that has claimed the exit ends with its code: nullptr (the default), _exit;
// in an MPI job, main sets MPI_Abort on the world (comm/agree.hpp: abort_world) while MPI
// runs. MPICH's launcher records a rank whose PMI connection closes before it finalizes
// with a provisional status 1 (and kills the others), and keeps it where it sees the closed
// connection before the rank's own status: the job then returned 1 (what its launcher
// prints as "Hangup (signal 1)") instead of 143, 3 runs in 110 of the second-signal cases
// here; an abort goes to the launcher with its code, which it returns.
void set_rank_end(void (*end)(int code));
// Returns once what this rank wrote to stderr has been read, or after `limit_ms`, where
// stderr is a pipe (a launcher's: MPICH's proxy, srun's step daemon); at once otherwise.
// For an abort: MPICH's proxy reads a rank's stderr and its PMI socket side by side, so a
// line written just before MPI_Abort can be read after the abort has gone to mpiexec, which
// then need not print it. One faults run ended 143 with neither rank's line nor MPICH's own
// "Abort(143)" line, the likely cause (not reproduced in 25 runs beside a busy machine).
void wait_for_stderr_read(int limit_ms);
// After claim_exit: ends the rank with `code` as set_rank_end says.
[[noreturn]] void end_claimed(int code);
// claim_exit, then end_claimed(code).
[[noreturn]] void exit_claimed(int code);

}  // namespace strata
