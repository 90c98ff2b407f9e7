// --inject-fault's specs (train/fault_injection.hpp): each kind read into its fields, and
// every malformed spec refused as a user error (exit 2) naming it. The faults themselves
// are driven through the real executable by tests/train/test_faults.sh.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "train/fault_injection.hpp"

using strata::FaultInjection;

TEST_CASE("--inject-fault reads its three kinds", "[fault_injection]") {
  const FaultInjection none = FaultInjection::parse({});
  CHECK(none.kind.empty());
  CHECK(none.pause_checkpoint_at == -1);
  const FaultInjection f = FaultInjection::parse({"hang:0:1", "pause-checkpoint:8"});
  CHECK(f.kind == "hang");
  CHECK(f.step == 0);
  CHECK(f.rank == 1);
  CHECK(f.pause_checkpoint_at == 8);
  const FaultInjection e = FaultInjection::parse({"error:6:3"});
  CHECK(e.kind == "error");
  CHECK(e.step == 6);
  CHECK(e.rank == 3);
  CHECK_THROWS_WITH(e.before_step(6, 3), "injected fault: a rank-local error before step 6");
  CHECK_NOTHROW(e.before_step(6, 2));
  CHECK_NOTHROW(e.before_step(5, 3));
}

TEST_CASE("--inject-fault refuses a spec it cannot read", "[fault_injection]") {
  for (const char* bad : {"hang", "hang:6", "hang:x:1", "hang:6:1x", "error:0:1", "error:6:-1", "crash:6:1",
                          "pause-checkpoint:0", "pause-checkpoint:8:1", "Error:6:1", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(FaultInjection::parse({bad}), strata::UserError);
  }
  CHECK_THROWS_WITH(FaultInjection::parse({"error:6:1", "hang:7:0"}), Catch::Contains("one error or hang per run"));
}
