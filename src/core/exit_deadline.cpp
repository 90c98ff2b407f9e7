#include "core/exit_deadline.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/process_exit.hpp"

namespace strata {

ExitDeadline::ExitDeadline(double seconds, int rank, int code) {
  thread_ = std::thread([this, seconds, rank, code] {
    std::unique_lock<std::mutex> lock(m_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return returned_; })) return;
    claim_exit();
    std::fprintf(stderr,
                 "strata: rank %d: MPI_Finalize did not return within %.0f s: ending the rank with exit code %d\n",
                 rank, seconds, code);
    std::fflush(stderr);
    _exit(code);
  });
}

ExitDeadline::~ExitDeadline() {
  {
    std::lock_guard<std::mutex> lock(m_);
    returned_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

}  // namespace strata
