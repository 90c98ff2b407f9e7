#pragma once
// Fault injection: `strata train --inject-fault SPEC` (repeatable) makes a run fail on
// purpose, the way a node or a file system fails, so that a site can see what its job
// scripts, its launcher and strata's restart do about it before a real failure does
// (docs/checkpoints.md, "Rehearsing a failure"); the fault tests (tests/train/
// test_faults.sh) run the real executable through it. Without the option nothing is
// injected, and it costs a comparison per round.
//   error:STEP:RANK        before step STEP (1-based), world rank RANK throws a rank-local
//                          error (an internal error: exit 1, the other ranks brought down)
//   hang:STEP:RANK         ... sleeps for ever, ignoring stop requests (a rank stuck in a
//                          collective; STEP 0: in the set-up, before the job is built)
//   pause-checkpoint:STEP  every rank pauses for ever halfway through writing the
//                          checkpoint of step STEP (to kill the job inside the write)
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct FaultInjection {
  int64_t pause_checkpoint_at = -1;
  std::string kind;  // "", "error", "hang"
  int64_t step = -1;
  int rank = -1;

  // The faults the specs name; a UserError (exit 2) names a spec it cannot read.
  static FaultInjection parse(const std::vector<std::string>& specs);
  // Called by every rank before each round that starts at `step` (1-based), and with
  // step 0 before the job is built.
  void before_step(int64_t step, int rank) const;
};

}  // namespace strata
