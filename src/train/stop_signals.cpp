#include "train/stop_signals.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "core/process_exit.hpp"

namespace strata {
namespace {
// Set by the signal thread (core/process_exit.hpp), read by the run loop and the watchdog.
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_rank{0};
std::atomic<double> g_first_at{0};  // steady-clock seconds of the first request

// A launcher may deliver one request twice (scancel signals the tasks and srun forwards
// it; pkill reaches mpiexec and the ranks): a repeat within this many seconds is the same.
constexpr double kRepeatWindowSeconds = 2;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// In the signal thread, one signal at a time.
void on_stop_signal(int sig) {
  const double now = now_seconds();
  if (g_stop_signal != 0 && sig != SIGUSR1 && now - g_first_at >= kRepeatWindowSeconds) {
    // the second request: the first was not (or cannot be) honoured
    char line[160];
    std::snprintf(line, sizeof line, "strata: error: rank %d: second %s: exiting at once, without a checkpoint",
                  g_rank.load(), signal_name(sig));
    exit_now(sig, line);
  }
  if (g_stop_signal == 0) {
    g_first_at = now;
    g_stop_signal = sig;
  }
}
}  // namespace

void exit_now(int sig, const char* line) {
  claim_exit();  // the launcher's signals, and any other thread's exit, wait from here on
  std::fprintf(stderr, "%s\n", line);
  std::fflush(stderr);
  // rank 0 ends first, the others a second later, so the launcher sees one rank's end (it
  // ends the others meanwhile): two aborts at once were seen to make MPICH's mpiexec return 1
  if (g_rank != 0) ::usleep(1000 * 1000);
  end_claimed(128 + sig);
}

void install_stop_signal_handlers(int rank) {
  g_rank = rank;
  start_signal_thread();  // (main started it; a program without it gets it here)
  on_terminating_signal(on_stop_signal);
}

int stop_signal_received() { return g_stop_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

}  // namespace strata
