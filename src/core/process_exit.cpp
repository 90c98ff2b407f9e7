#include "core/process_exit.hpp"

#include <csignal>
#include <initializer_list>

namespace strata {

void ignore_terminating_signals() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2}) sigaction(s, &ignore, nullptr);
}

}  // namespace strata
