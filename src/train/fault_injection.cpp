#include "train/test_faults.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace strata {

TestFaults TestFaults::from_environment() {
  TestFaults f;
  if (const char* p = std::getenv("STRATA_TEST_PAUSE_CHECKPOINT_AT_STEP")) f.pause_checkpoint_at = std::atoll(p);
  if (const char* p = std::getenv("STRATA_TEST_FAULT")) {
    char kind[16] = {0};
    long long step = -1;
    int rank = -1;
    if (std::sscanf(p, "%15[a-z]:%lld:%d", kind, &step, &rank) == 3) {
      f.kind = kind;
      f.step = step;
      f.rank = rank;
    }
  }
  return f;
}

void TestFaults::before_step(int64_t at, int my_rank) const {
  if (kind == "hang" && at == 0 && step == 0 && my_rank != rank) {
    // the other ranks of a set-up hang say they are there too (their stop requests are
    // taken from here on), so a test signals them no sooner
    std::fprintf(stderr, "strata: test fault: rank %d is at the set-up\n", my_rank);
    std::fflush(stderr);
  }
  if (kind.empty() || at != step || my_rank != rank) return;
  if (kind == "error") throw std::runtime_error("test fault: a rank-local error before step " + std::to_string(at));
  if (kind == "hang") {
    if (at == 0)
      std::fprintf(stderr, "strata: test fault: rank %d hangs in the set-up\n", my_rank);
    else
      std::fprintf(stderr, "strata: test fault: rank %d hangs before step %lld\n", my_rank, (long long)at);
    std::fflush(stderr);
    for (;;) ::sleep(1000);
  }
}

}  // namespace strata
