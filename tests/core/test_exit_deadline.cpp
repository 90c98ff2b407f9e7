// ExitDeadline ends a process whose guarded call does not return in time, with the code
// it was given, and does nothing to one whose call returns. Each case runs in a child
// process (fork), whose exit status the test reads.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "core/exit_deadline.hpp"

namespace {

// The exit status of a child that runs `body` and then exits 0.
template <class Body>
int child_status(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("ExitDeadline ends a rank whose last call hangs, with its code", "[exit_deadline]") {
  const auto t0 = std::chrono::steady_clock::now();
  const int status = child_status([] {
    const strata::ExitDeadline deadline(0.2, 3, 42);
    std::this_thread::sleep_for(std::chrono::seconds(60));  // the hanging call (never reached its end)
  });
  CHECK(status == 42);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("ExitDeadline leaves a rank whose last call returns alone", "[exit_deadline]") {
  const int status = child_status([] { const strata::ExitDeadline deadline(30, 0, 42); });
  CHECK(status == 0);
}
