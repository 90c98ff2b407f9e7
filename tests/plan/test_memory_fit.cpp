// The memory check before a run (plan/memory_fit.hpp) weighs the layout the deck runs,
// every dimension of it (the deck's own Layout: no converter between the deck and the
// planner); every layout the planner considers for decks with each split is run by its
// overrides, key for key; and a 3D, an expert and an MGRIT deck are
// accepted under a limit that only their split lets them fit, and refused in one line
// without it.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/deck_reading.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"
#include "plan/layout.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory_fit.hpp"
#include "plan/step_prediction.hpp"
#include "support/source_file.hpp"

using namespace strata;
using strata::test::source_file;

namespace {

Deck tiny(const std::vector<std::string>& overrides) {
  return load_model_deck(source_file("tests/plan/plan-tiny.toml"), overrides);
}

// Every layout the planner considers for the deck that `read` reads (with the overrides
// given) is what the deck read with the planner's overrides for it runs ("run it with:
// --set ...", run_overrides: strata train accepts them), key for key.
void require_overrides_select(const std::function<Deck(std::vector<std::string>)>& read, int ranks, size_t at_least) {
  const auto layouts = feasible_layouts(read({}), ranks);
  INFO(ranks << " ranks: " << layouts.size() << " layouts");
  REQUIRE(layouts.size() >= at_least);
  for (const Layout& l : layouts) {
    INFO(plan_name(l));
    const Deck run = read(run_overrides(read({}), l));
    CHECK(plan_name(run.parallel) == plan_name(l));
    CHECK(resolved_deck_text(run, model_deck_keys()) == resolved_deck_text(with_layout(run, l), model_deck_keys()));
  }
}

int64_t need(const Deck& deck) {
  const MemoryPrediction m = predict_memory(deck, deck.parallel);
  return m.state_bytes + m.activation_bytes;
}

// The deck's need is that of the layout written out by hand, it fits a per-rank limit
// half-way between its need and the unsplit deck's, and the unsplit one is refused there, in
// one line naming the limit and the layout.
void require_fits_only_split(const Deck& split, const Layout& by_hand, const Deck& unsplit) {
  const int64_t small = need(split), large = need(unsplit);
  INFO(plan_name(by_hand) << ": " << small << " bytes a rank split, " << large << " unsplit");
  const MemoryPrediction expected = predict_memory(split, by_hand);
  CHECK(small == expected.state_bytes + expected.activation_bytes);
  REQUIRE(small * 3 < large * 2);  // the split saves at least a third
  MemoryCapacity limit;
  limit.rank_bytes = (small + large) / 2;
  limit.rank_source = "ulimit -d";
  CHECK_NOTHROW(check_fits_in_memory(split, limit));
  try {
    check_fits_in_memory(unsplit, limit);
    FAIL("the unsplit deck was accepted");
  } catch (const UserError& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find("the run needs about") != std::string::npos);
    CHECK(what.find("but ulimit -d limits each rank to") != std::string::npos);
    CHECK(what.find(layout_name(unsplit.parallel)) != std::string::npos);
  }
  // the node's memory shared by the ranks: the same line of reasoning
  MemoryCapacity node;
  node.node_bytes = limit.rank_bytes * 4;
  node.sharers = 4;
  CHECK_NOTHROW(check_fits_in_memory(split, node));
  CHECK_THROWS_AS(check_fits_in_memory(unsplit, node), UserError);
}

}  // namespace

TEST_CASE("every layout the planner considers is run by its overrides", "[plan][layout]") {
  const auto tiny_with = [](std::vector<std::string> base) {
    return [base](std::vector<std::string> more) {
      more.insert(more.begin(), base.begin(), base.end());
      return tiny(more);
    };
  };
  SECTION("1D, 2D, context, pipelines, ZeRO, recomputation") {
    for (int ranks : {1, 2, 4, 8})
      require_overrides_select(tiny_with({"parallel.zero=1", "parallel.recompute=\"selective\""}), ranks, 1);
    require_overrides_select(tiny_with({"parallel.sequence_parallel=true", "parallel.tensor_cols=2"}), 4, 20);
  }
  SECTION("3D splits") {
    require_overrides_select(tiny_with({"parallel.tensor_mode=\"3d\"", "parallel.tensor_x=2"}), 8, 40);
  }
  SECTION("experts") {
    require_overrides_select(tiny_with({"model.moe_experts=4", "model.moe_every=1", "parallel.zero=2"}), 4, 20);
  }
  SECTION("MGRIT") {
    const auto mgrit_deck = [](std::vector<std::string> more) {
      return load_model_deck(source_file("inputs/gpt-fortunes-mgrit.toml"), more);
    };
    require_overrides_select(mgrit_deck, 2, 1);
    size_t mgrit = 0;
    for (const Layout& l : feasible_layouts(mgrit_deck({}), 4)) mgrit += l.mgrit() ? 1 : 0;
    CHECK(mgrit >= 2);
    require_overrides_select(mgrit_deck, 4, 10);
  }
}

TEST_CASE("the memory check weighs the split the deck runs", "[plan][memory_fit]") {
  const std::vector<std::string> wide = {"model.n_embd=256", "model.n_head=8", "model.vocab_size=512",
                                         "model.seq_len=32"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), wide.begin(), wide.end());
    return tiny(more);
  };
  Layout l;
  SECTION("3D: 2 x 2 x 2") {
    l.tensor_mode = TensorMode::ThreeD;
    l.tensor_x = l.tensor_y = l.tensor_depth = 2;
    require_fits_only_split(
        with({"parallel.tensor_mode=\"3d\"", "parallel.tensor_x=2", "parallel.tensor_y=2", "parallel.tensor_depth=2"}),
        l, with({}));
  }
  SECTION("experts: 8 over 4 data ranks") {
    const std::vector<std::string> moe = {"model.moe_experts=8", "model.moe_every=1", "model.moe_ffn_hidden=1024",
                                          "parallel.data=4"};
    auto split = moe, unsplit = moe;
    split.push_back("parallel.expert=4");
    l.data = l.expert = 4;
    require_fits_only_split(with(split), l, with(unsplit));
  }
  SECTION("MGRIT: 4 layer ranks") {
    l.pipeline = 4;
    l.layer_method = LayerMethod::MGRIT;
    l.mgrit_levels = 2;
    require_fits_only_split(with({"model.n_layer=16", "parallel.pipeline=4", "parallel.schedule=\"mgrit\"",
                                  "layerpar.levels=2", "layerpar.cfactor=2"}),
                            l, with({"model.n_layer=16"}));
  }
}
