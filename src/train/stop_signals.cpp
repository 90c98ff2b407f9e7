#include "train/stop_signals.hpp"

#include <csignal>

namespace strata {
namespace {
// Signal handlers can only talk through a flag of this type: process-wide by nature.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal_received() { return int(g_stop_signal); }

}  // namespace strata
