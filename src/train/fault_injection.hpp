#pragma once
// Faults the fault tests (tests/train/test_faults.sh) inject through the environment, so that they
// exercise the real executable in the real run loop. Unset, they cost one getenv at
// start-up and nothing per step.
//   STRATA_TEST_PAUSE_CHECKPOINT_AT_STEP=S   the checkpoint of step S sleeps halfway
//                                            through its write (a test kills the job there)
//   STRATA_TEST_FAULT=KIND:STEP:RANK         before step STEP (1-based; 0: before the job is
//                                            built, in the train command), on world rank RANK:
//                                            KIND "error" throws a rank-local error,
//                                            "hang" sleeps for ever, ignoring stop requests
#include <cstdint>
#include <string>

namespace strata {

struct TestFaults {
  int64_t pause_checkpoint_at = -1;
  std::string kind;  // "", "error", "hang"
  int64_t step = -1;
  int rank = -1;

  static TestFaults from_environment();
  // Called by every rank before each round that starts at `step` (1-based).
  void before_step(int64_t step, int rank) const;
};

}  // namespace strata
