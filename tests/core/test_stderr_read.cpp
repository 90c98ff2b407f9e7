// wait_for_stderr_read (core/process_exit.hpp), which a rank calls before MPI_Abort so its
// last line reaches the launcher first: with stderr a pipe it returns once the reader has
// taken what was written, and, with no reader, after its limit with the bytes still there.
// Each case runs in a child process (fork) whose stderr is the pipe.
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "core/process_exit.hpp"

namespace {

// Runs `reader(read_end)` in this process, and in a child whose stderr is the pipe's
// write end: writes a line, waits for it to be read (at most limit_ms), then exits with
// the number of bytes still unread (0..255).
template <class Reader>
int unread_after_wait(int limit_ms, Reader reader) {
  int p[2];
  REQUIRE(pipe(p) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    dup2(p[1], STDERR_FILENO);
    const char line[] = "strata: error: the last line before an abort\n";
    if (write(STDERR_FILENO, line, sizeof line - 1) < 0) _exit(255);
    strata::wait_for_stderr_read(limit_ms);
    int unread = -1;
    ioctl(STDERR_FILENO, FIONREAD, &unread);
    _exit(unread);
  }
  close(p[1]);
  reader(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  close(p[0]);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("wait_for_stderr_read returns once the launcher's side has read the line", "[process_exit]") {
  std::string got;
  const int unread = unread_after_wait(2000, [&](int fd) {
    // a slow launcher: the line sits in the pipe for 200 ms first (the wait's result does
    // not hang on this delay; a wait that returned at once would find the line unread)
    usleep(200 * 1000);
    char buf[256];
    ssize_t n = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0) got.append(buf, size_t(n));  // until the child exits
  });
  CHECK(unread == 0);
  CHECK(got == "strata: error: the last line before an abort\n");
}

TEST_CASE("wait_for_stderr_read gives up after its limit when nobody reads", "[process_exit]") {
  // the reader waits for the child to end before reading: the child's wait runs out
  const int unread = unread_after_wait(300, [](int) {});
  CHECK(unread == int(std::strlen("strata: error: the last line before an abort\n")));
}
