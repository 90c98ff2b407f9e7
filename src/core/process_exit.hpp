#pragma once
// Ending a rank on purpose with a code of its own (a second stop signal, the stop watchdog,
// an error no agreement can reach): MPICH's launcher reports the wait status of the rank
// that ends first and ends the others, and a rank on its way out was seen to die by a
// SIGHUP between its last line and its exit; the job then returned 1 (that signal's
// status) instead of the rank's code. Ignoring the terminating signals first closes that
// window, process-wide (a handler's mask covers only its own thread). SIGKILL cannot be
// ignored; the launcher records a rank it kills so as exit 0.

namespace strata {

// Sets SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2 to be ignored.
// Async-signal-safe; only for a rank that is about to exit.
void ignore_terminating_signals();

}  // namespace strata
