#pragma once
// SIGUSR1 and SIGTERM (Slurm's --signal, a time limit, scancel) ask the run to write a
// checkpoint at the next step boundary and stop. The handler only sets a flag; the
// trainer turns it into a collective decision so every rank stops at the same step.
#include <cstdint>

namespace strata {

void install_stop_signal_handlers();
// The signal number that asked for a stop on this rank, or 0.
int stop_signal_received();

// run.max_walltime: stop while there is time for two more steps and two checkpoint
// writes, plus 5 s, after `steps` steps in `elapsed` seconds (0: no limit).
inline bool out_of_walltime(double max_walltime, double elapsed, int64_t steps, double checkpoint_seconds) {
  if (max_walltime <= 0 || steps <= 0) return false;
  const double per_step = elapsed / double(steps);
  return elapsed + 2 * per_step + 2 * checkpoint_seconds + 5 > max_walltime;
}

}  // namespace strata
