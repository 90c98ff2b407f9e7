#include "core/process_exit.hpp"

#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <initializer_list>
#include <thread>

namespace strata {
namespace {

std::atomic<bool> g_exit_claimed{false};
std::atomic<bool> g_thread_started{false};
std::atomic<void (*)(int)> g_action{nullptr};
std::atomic<void (*)(int)> g_rank_end{nullptr};

sigset_t launcher_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGHUP, SIGINT, SIGTERM, SIGUSR1}) sigaddset(&set, s);
  return set;
}

// The signal's default action, taken in this thread (the only one where it is unblocked):
// the process ends by the signal, as it would without the signal thread.
[[noreturn]] void default_action(int sig) {
  claim_exit();
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
  _exit(128 + sig);  // (not reached: each of the signals ends the process by default)
}

void wait_for_signals(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    void (*action)(int) = g_action.load();
    if (action)
      action(sig);
    else
      default_action(sig);
  }
}

}  // namespace

void start_signal_thread() {
  if (g_thread_started.exchange(true)) return;
  const sigset_t set = launcher_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(wait_for_signals, set).detach();  // ends with the process
}

void on_terminating_signal(void (*action)(int sig)) { g_action = action; }

void claim_exit() {
  if (g_exit_claimed.exchange(true))
    for (;;) ::pause();  // another thread is ending the process
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2}) sigaction(s, &ignore, nullptr);
}

void wait_for_stderr_read(int limit_ms) {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  const timespec one_ms{0, 1000 * 1000};
  for (int waited = 0; waited < limit_ms; ++waited) {
    int unread = 0;
    if (::ioctl(STDERR_FILENO, FIONREAD, &unread) != 0 || unread == 0) return;
    ::nanosleep(&one_ms, nullptr);
  }
}

void set_rank_end(void (*end)(int code)) { g_rank_end = end; }

void end_claimed(int code) {
  if (void (*end)(int) = g_rank_end.load()) end(code);
  ::_exit(code);
}

void exit_claimed(int code) {
  claim_exit();
  end_claimed(code);
}

}  // namespace strata
