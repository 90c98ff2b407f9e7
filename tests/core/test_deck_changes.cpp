// What a restart compares: the deck a checkpoint was written with against the current one.
#include <catch2/catch.hpp>

#include "core/deck.hpp"
#include "core/deck_changes.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"

using namespace strata;

TEST_CASE("deck_changes lists the keys whose values differ, sorted", "[core][deck]") {
  const std::string base = "[data]\nkind = \"random\"\n";
  const Deck a = parse_model_deck(base, "a.toml", {"run.steps=10", "optim.lr=0.001"});
  const Deck b =
      parse_model_deck(base, "b.toml", {"run.steps=20", "optim.lr=0.001", "model.n_head=8", "model.n_embd=256"});
  CHECK(deck_changes(a.resolved_toml, a.resolved_toml, model_deck_keys()).empty());
  const auto changes = deck_changes(a.resolved_toml, b.resolved_toml, model_deck_keys());
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].key == "model.n_head");
  CHECK(changes[0].before == "4");
  CHECK(changes[0].after == "8");
  CHECK(changes[1].key == "run.steps");
  // a key the older deck did not write had its default: a change only if the value differs
  const auto added = deck_changes("[run]\nsteps = 20\n", "[run]\nsteps = 20\nstop_timeout = 30.0\n", model_deck_keys());
  REQUIRE(added.size() == 1);
  CHECK(added[0].before == "(absent)");
  CHECK(deck_changes("[run]\nsteps = 20\n", "[run]\nsteps = 20\nstop_timeout = 60.0\n", model_deck_keys()).empty());
  // whole numbers written as 1 (older resolved decks) and as 1.0 are the same value
  CHECK(deck_changes("[model]\nt_final = 1\n", "[model]\nt_final = 1.0\n", model_deck_keys()).empty());
  CHECK(deck_changes("[model]\nt_final = 1\n", "[model]\nt_final = 1.5\n", model_deck_keys()).size() == 1);
  CHECK_THROWS_AS(deck_changes("[run", b.resolved_toml, model_deck_keys()), UserError);
}
