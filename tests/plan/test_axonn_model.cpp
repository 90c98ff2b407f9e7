// AxoNN's communication model (src/plan/axonn_model.hpp): its closed-form traffic of a
// block's linears equals what the engine's 3D linears declare (parallel/tp_traffic, which
// plan_check holds to Comm's counters), and the splits it ranks are the cheapest of their
// tensor size by its own measure, each one the widths allow.
#include <array>
#include <catch2/catch.hpp>
#include <cstdlib>

#include "parallel/tp_traffic.hpp"
#include "plan/axonn_model.hpp"
#include "support/source_file.hpp"

using namespace strata;
using strata::test::source_file;

TEST_CASE("AxoNN model: a block's linears send what the engine's 3D linears declare", "[plan][axonn]") {
  const int64_t c = 48, rows = 40, e = 4;
  for (const auto& [tx, ty, tz] :
       {std::array<int, 3>{2, 1, 2}, {1, 2, 2}, {2, 2, 1}, {2, 2, 2}, {4, 2, 3}, {1, 1, 4}}) {
    TensorParallel tp;
    tp.mode = TensorMode::ThreeD;
    tp.nx = tx, tp.ny = ty, tp.nz = tz;
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

TEST_CASE("AxoNN model: the best splits of a tensor size are the cheapest that the widths allow", "[plan][axonn]") {
  const Deck deck = load_deck(source_file("inputs/gpt-1.3b.toml"));
  const MachineFile m = read_machine_file(source_file("machines/h100-dgx-cluster.toml"));
  for (const int size : {2, 4, 8, 16, 64}) {
    const auto all = best_3d_splits(deck, 64, size, 1000, &m);
    const auto best = best_3d_splits(deck, 64, size, 2, &m);
    INFO("size " << size);
    REQUIRE(!all.empty());
    REQUIRE(best.size() == std::min<size_t>(2, all.size()));
    double last = 0;
    for (const Layout& l : all) {
      CHECK(l.tx * l.ty * l.tz == size);
      CHECK(l.data * size == 64);
      CHECK(deck.model.n_embd % (l.tx * l.tz) == 0);
      CHECK(deck.model.n_head % l.ty == 0);
      const double exposed = axonn_step_cost(deck, l, m).exposed;
      CHECK(exposed >= last);  // sorted
      last = exposed;
    }
    CHECK(best[0].name() == all[0].name());
  }
  // the model's overlap: switched off, nothing of the depth group hides
  Deck off = deck;
  off.parallel.tensor_overlap = false;
  Layout l;
  l.tensor = TensorMode::ThreeD, l.tx = 2, l.ty = 2, l.tz = 2, l.data = 8;
  const auto on_cost = axonn_step_cost(deck, l, m), off_cost = axonn_step_cost(off, l, m);
  CHECK(off_cost.exposed == Approx(off_cost.seconds));
  CHECK(on_cost.exposed < off_cost.exposed);
  CHECK(on_cost.wire_bytes == off_cost.wire_bytes);
}
