// ZeRO-3's memory goal, from the planner's predict_memory (which plan_check_zero2_np4 and
// plan_check_zero3_moe_np4 hold to the runs' memory lines, value for value): "small"
// (inputs/bench-gpt-small.toml) on 2 data ranks keeps at most 55% of ZeRO-0's parameter,
// gradient and moment bytes per rank with ZeRO-3, with the finer units ZeRO-2 and 3 take (a
// block's linears, the tied wte's vocabulary chunks). Each stage's share is stated exactly.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "model/model_kind.hpp"
#include "plan/layout.hpp"
#include "plan/step_prediction.hpp"
#include "support/source_file.hpp"

using namespace strata;
using strata::test::source_file;

TEST_CASE("ZeRO-3 holds at most 55% of ZeRO-0's state on 'small' over 2 data ranks", "[plan][zero]") {
  const Deck deck = load_model_deck(source_file("inputs/bench-gpt-small.toml"));
  const auto state = [&](int zero) {
    Layout l;
    l.data = 2;
    l.zero = zero;
    return double(predict_memory(deck, l).state_bytes);
  };
  const double zero0 = state(0), mib = 1024.0 * 1024.0;
  CHECK(zero0 / mib == Approx(211.96).epsilon(1e-4));  // the run's memory line: 52.99 x 4
  CHECK(state(1) / zero0 == Approx(0.750).epsilon(1e-3));
  CHECK(state(2) / zero0 == Approx(0.646).epsilon(1e-3));  // the finer units' slots (whole blocks: 0.715)
  const double zero3 = state(3) / zero0;
  INFO("ZeRO-3: " << state(3) / mib << " MiB, " << 100 * zero3 << "% of ZeRO-0's");
  CHECK(zero3 <= 0.55);
  CHECK(zero3 > 0.50);  // the owned halves, and a working set of two units on each side
}
