#pragma once
// SIGUSR1 and SIGTERM (Slurm's --signal, a time limit, scancel) ask the run to write a
// checkpoint at the next step boundary and stop. The handler only sets a flag; the
// trainer turns it into a collective decision so every rank stops at the same step.
namespace strata {

void install_stop_signal_handlers();
// The signal number that asked for a stop on this rank, or 0.
int stop_signal_received();

}  // namespace strata
