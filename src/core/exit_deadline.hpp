#pragma once
// A deadline on the last thing a rank does: if the guarded call (MPI_Finalize) has not
// returned within `seconds`, a thread prints one line naming the rank and ends the
// process with `code`. MPI_Finalize can wait for ever on a peer that has already gone
// into the launcher's final barrier: with Debian's MPICH (ch4:ucx, UCX 1.13) over TCP,
// one in ten two-node runs hung there until comm/connect_all.hpp (jobscripts/README.md). By then
// the run's work is done and its outputs written, so ending the rank with the code the run
// earned is the honest outcome; the job must not sit out its time limit.
#include <condition_variable>
#include <mutex>
#include <thread>

namespace strata {

class ExitDeadline {
 public:
  ExitDeadline(double seconds, int rank, int code);
  ~ExitDeadline();  // the guarded call returned: the thread ends without acting
  ExitDeadline(const ExitDeadline&) = delete;
  ExitDeadline& operator=(const ExitDeadline&) = delete;

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool returned_ = false;
  std::thread thread_;
};

}  // namespace strata
