#pragma once
// Ends this rank when a stop request (stop_signals.hpp) has not been taken up by the run
// loop (or, made before the job is built, by the end of the set-up) within `timeout` seconds (or what the loop expects
// a healthy round to need, if longer): a rank stuck in a collective (a peer hangs, a file system stalls) never reaches
// the step boundary where stops are agreed. It prints one line naming the rank and the signal, and exits with 128 +
// signal without MPI_Finalize, which makes the launcher (mpiexec, srun) end the other ranks. Rank 0 goes first, the
// others kGraceAfterRank0 seconds later, so the launcher sees one rank's exit code: when
// every rank exited within the same poll, MPICH's mpiexec sometimes returned 1 instead of
// 143 (about 1 run in 6 of the faults test; the same exit 1 of the second signal was a
// rank killed by a SIGHUP before its own exit, which exit_now in stop_signals.hpp now
// prevents for both). A thread polls the flag every 100 ms; it never calls MPI.
#include <atomic>
#include <thread>

namespace strata {

class StopWatchdog {
 public:
  // timeout <= 0: no watchdog.
  StopWatchdog(double timeout_seconds, int rank);
  ~StopWatchdog();
  StopWatchdog(const StopWatchdog&) = delete;
  StopWatchdog& operator=(const StopWatchdog&) = delete;
  // The run loop has agreed to stop: from now on the stop is being honoured.
  void acknowledge() { acknowledged_ = true; }
  // The longest a healthy rank may need to reach the next step boundary, as the run loop
  // has measured it: the timeout is at least this (a step of a large model can take
  // longer than run.stop_timeout).
  void expect_at_most(double seconds) { floor_ = seconds; }

 private:
  static constexpr double kGraceAfterRank0 = 2.0;
  void watch();
  double timeout_;
  std::atomic<double> floor_{0};
  int rank_;
  std::atomic<bool> acknowledged_{false}, done_{false};
  std::thread thread_;
};

}  // namespace strata
