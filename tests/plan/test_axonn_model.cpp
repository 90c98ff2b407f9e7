// AxoNN's communication model (src/plan/axonn_model.hpp): its closed-form traffic of a
// block's linears equals what the engine's 3D linears declare (parallel/tp_traffic, which
// plan_check holds to Comm's counters).
#include <array>
#include <catch2/catch.hpp>

#include "parallel/tp_traffic.hpp"
#include "plan/axonn_model.hpp"

using namespace strata;

TEST_CASE("AxoNN model: a block's linears send what the engine's 3D linears declare", "[plan][axonn]") {
  const int64_t c = 48, rows = 40, e = 4;
  for (const auto& [tx, ty, tz] :
       {std::array<int, 3>{2, 1, 2}, {1, 2, 2}, {2, 2, 1}, {2, 2, 2}, {4, 2, 3}, {1, 1, 4}}) {
    AxonnSplit split;
    split.nx = tx, split.ny = ty, split.nz = tz;
    const TensorParallel tp(split);
    Traffic declared;  // as TransformerBlock::traffic runs them, with the local widths
    const int64_t cx = c / tx, ay = c / ty, fy = 4 * c / ty;
    tp_linear_in_forward_traffic(declared, tp, rows, cx, 3 * ay, e);
    tp_linear_out_forward_traffic(declared, tp, rows, ay, cx, e);
    tp_linear_in_forward_traffic(declared, tp, rows, cx, fy, e);
    tp_linear_out_forward_traffic(declared, tp, rows, fy, cx, e);
    tp_linear_out_backward_traffic(declared, tp, rows, fy, cx, e);
    tp_linear_in_backward_traffic(declared, tp, rows, cx, fy, e);
    tp_linear_out_backward_traffic(declared, tp, rows, ay, cx, e);
    tp_linear_in_backward_traffic(declared, tp, rows, cx, 3 * ay, e);
    const Traffic model = axonn_block_traffic(c, rows, tx, ty, tz, e);
    INFO("X x Y x Z = " << tx << " x " << ty << " x " << tz);
    for (const auto& [key, d] : declared.entries()) {
      if (d.calls == 0 || d.ranks == 1) continue;
      INFO(key.first << " " << key.second);
      REQUIRE(model.entries().count(key) == 1);
      const auto& m = model.entries().at(key);
      CHECK(m.calls == d.calls);
      CHECK(m.payload_bytes == d.payload_bytes);
      CHECK(m.ranks == d.ranks);
    }
    for (const auto& [key, m] : model.entries()) CHECK(declared.entries().count(key) == 1);
    CHECK(model.wire_bytes() == Approx(declared.wire_bytes()).epsilon(1e-12));
  }
}
