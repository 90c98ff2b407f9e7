#include "train/stop_signals.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <initializer_list>

#include "core/process_exit.hpp"

namespace strata {
namespace {
// Signal handlers can only talk through flags of this type: process-wide by nature.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_rank = 0;
volatile std::sig_atomic_t g_first_at = 0;  // CLOCK_MONOTONIC seconds of the first request

// A launcher may deliver one request twice (scancel signals the tasks and srun forwards
// it; pkill reaches mpiexec and the ranks): a repeat within this many seconds is the same.
constexpr int kRepeatWindowSeconds = 2;

int monotonic_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return int(t.tv_sec);
}

extern "C" void on_stop_signal(int sig) {
  const int now = monotonic_seconds();
  if (g_stop_signal != 0 && sig != SIGUSR1 && now - g_first_at >= kRepeatWindowSeconds) {
    // the second request: the first was not (or cannot be) honoured; only
    // async-signal-safe calls from here on
    char line[160];
    const int n =
        std::snprintf(line, sizeof line, "strata: error: rank %d: second %s: exiting at once, without a checkpoint\n",
                      int(g_rank), signal_name(sig));
    if (n > 0) (void)!::write(2, line, size_t(n));
    exit_now(sig);
  }
  if (g_stop_signal == 0) {
    g_first_at = now;
    g_stop_signal = sig;
  }
}
}  // namespace

void exit_now(int sig) {
  ignore_terminating_signals();  // the launcher's, meanwhile (core/process_exit.hpp says why)
  ::_exit(128 + sig);
}

void install_stop_signal_handlers(int rank) {
  g_rank = rank;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  // every catchable signal waits while the handler runs in this thread (exit_now says why)
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGUSR1, SIGTERM, SIGINT}) sigaction(sig, &sa, nullptr);
}

int stop_signal_received() { return int(g_stop_signal); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

}  // namespace strata
