#include "train/stop_watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "train/stop_signals.hpp"

namespace strata {

StopWatchdog::StopWatchdog(double timeout_seconds, int rank) : timeout_(timeout_seconds), rank_(rank) {
  if (timeout_ > 0) thread_ = std::thread([this] { watch(); });
}

StopWatchdog::~StopWatchdog() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

void StopWatchdog::watch() {
  using clock = std::chrono::steady_clock;
  clock::time_point seen{};
  bool pending = false;
  while (!done_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int sig = stop_signal_received();
    if (sig == 0 || acknowledged_) continue;
    if (!pending) {
      pending = true;
      seen = clock::now();
    }
    const double waited = std::chrono::duration<double>(clock::now() - seen).count();
    const double limit = std::max(timeout_, floor_.load()) + (rank_ == 0 ? 0.0 : kGraceAfterRank0);
    if (waited > limit) {
      char line[320];
      std::snprintf(line, sizeof line,
                    "strata: error: rank %d: %s asked to stop %.0f s ago, but this rank never reached a step "
                    "boundary (stuck in the set-up, a collective or a stalled write?): exiting without a checkpoint "
                    "(run.stop_timeout = %g)",
                    rank_, signal_name(sig), waited, timeout_);
      exit_now(sig, line);
    }
  }
}

}  // namespace strata
