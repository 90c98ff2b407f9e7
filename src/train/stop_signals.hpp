#pragma once
// SIGUSR1, SIGTERM, SIGINT and SIGHUP (Slurm's --signal, a time limit, scancel, Ctrl-C on
// mpiexec, a closed session) ask the run to write a checkpoint at the next step boundary
// and stop. The signal thread (core/process_exit.hpp: the one thread the signals reach)
// only sets a flag; the run loop turns it into a collective decision so every rank stops at
// the same step. A second SIGTERM, SIGINT or SIGHUP ends the rank at once (exit 128 +
// signal, one line on stderr), and StopWatchdog (stop_watchdog.hpp) does the same when a
// stop request is not taken up in time, so a job stuck in a collective still ends.
#include <cstdint>

namespace strata {

// rank: named in the line a second signal prints.
void install_stop_signal_handlers(int rank = 0);
// The signal number that asked for a stop on this rank, or 0.
int stop_signal_received();
// "SIGTERM", "SIGUSR1", "SIGINT", "SIGHUP" or "a signal".
const char* signal_name(int sig);
// Ends the rank at once with exit code 128 + sig, without a checkpoint, after printing
// `line` (one line, no newline) to stderr: the exit claimed first (core/process_exit.hpp),
// so no launcher's signal and no other thread's exit comes between the line and the code.
[[noreturn]] void exit_now(int sig, const char* line);

// run.max_walltime: stop while there is time for two more steps and two checkpoint
// writes, plus 5 s, after `steps` steps in `elapsed` seconds (0: no limit).
inline bool out_of_walltime(double max_walltime, double elapsed, int64_t steps, double checkpoint_seconds) {
  if (max_walltime <= 0 || steps <= 0) return false;
  const double per_step = elapsed / double(steps);
  return elapsed + 2 * per_step + 2 * checkpoint_seconds + 5 > max_walltime;
}

}  // namespace strata
