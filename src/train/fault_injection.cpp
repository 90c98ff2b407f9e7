#include "train/fault_injection.hpp"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "core/error.hpp"

namespace strata {
namespace {

[[noreturn]] void bad_spec(const std::string& spec) {
  throw UserError("--inject-fault '" + spec +
                  "': expected error:STEP:RANK, hang:STEP:RANK or pause-checkpoint:STEP (STEP and RANK whole "
                  "numbers, STEP >= 1 but hang's >= 0)");
}

}  // namespace

FaultInjection FaultInjection::parse(const std::vector<std::string>& specs) {
  FaultInjection f;
  for (const std::string& spec : specs) {
    char kind[24] = {0};
    long long step = -1;
    int rank = -1;
    char rest = 0;
    const int n = std::sscanf(spec.c_str(), "%23[a-z-]:%lld:%d%c", kind, &step, &rank, &rest);
    const std::string k = kind;
    if (k == "pause-checkpoint" && n == 2 && step >= 1) {
      f.pause_checkpoint_at = step;
    } else if ((k == "error" || k == "hang") && n == 3 && step >= (k == "hang" ? 0 : 1) && rank >= 0) {
      if (!f.kind.empty()) throw UserError("--inject-fault '" + spec + "': one error or hang per run");
      f.kind = k;
      f.step = step;
      f.rank = rank;
    } else {
      bad_spec(spec);
    }
  }
  return f;
}

void FaultInjection::before_step(int64_t at, int my_rank) const {
  if (kind == "hang" && at == 0 && step == 0 && my_rank != rank) {
    // the other ranks of a set-up hang say they are there too (their stop requests are
    // taken from here on), so a test signals them no sooner
    std::fprintf(stderr, "strata: injected fault: rank %d is at the set-up\n", my_rank);
    std::fflush(stderr);
  }
  if (kind.empty() || at != step || my_rank != rank) return;
  if (kind == "error") throw std::runtime_error("injected fault: a rank-local error before step " + std::to_string(at));
  if (kind == "hang") {
    if (at == 0)
      std::fprintf(stderr, "strata: injected fault: rank %d hangs in the set-up\n", my_rank);
    else
      std::fprintf(stderr, "strata: injected fault: rank %d hangs before step %lld\n", my_rank, (long long)at);
    std::fflush(stderr);
    for (;;) ::sleep(1000);
  }
}

}  // namespace strata
