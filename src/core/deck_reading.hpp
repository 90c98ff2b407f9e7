#pragma once
// Reading a deck: the TOML file (or text) with its overrides, through the key table
// (deck_keys.hpp), the rules across keys and the model kind's, to a validated Deck.
#include <functional>
#include <string>
#include <vector>

#include "core/deck.hpp"
#include "core/deck_key.hpp"

namespace strata {

// Reads and validates a deck. overrides are "section.key=value" strings applied on top of
// the file (the value is parsed as TOML, or taken as a string when it does not parse).
// model_rules: what the core does not know of the deck's model kind (src/model's
// load_model_deck passes them). names_kind throws a UserError when model.kind names no
// kind, before a key is refused as another kind's; check, the kind's rules, after the keys
// and the rules that tie them and before the layout's fit (UserError, origin in front).
// table: every key a deck may have, the core's and the kinds' (nullptr: the core's alone).
struct ModelRules {
  std::function<void(const std::string& kind)> names_kind;
  std::function<void(const Deck&, const std::string& origin)> check;
  const std::vector<DeckKey>* table = nullptr;
};
// What a key set where it has no effect gets (deck_keys.hpp: inert): refused (a deck a user
// wrote), or let be (a deck a checkpoint stored, which older strata wrote so; a deck whose
// layout the planner chooses).
enum class KeyEffect { Refuse, Ignore };
Deck load_deck(const std::string& path, const std::vector<std::string>& overrides = {},
               const ModelRules& model_rules = {}, KeyEffect effect = KeyEffect::Refuse);

// The same from TOML text already in memory (tests, tools, checkpoints' decks). origin names it in errors.
Deck parse_deck(const std::string& toml_text, const std::string& origin, const std::vector<std::string>& overrides = {},
                const ModelRules& model_rules = {}, KeyEffect effect = KeyEffect::Refuse);

// The deck as TOML, every key of `table` its model reads at its value (what
// Deck::resolved_toml holds of a deck read from text; a run's deck.toml).
std::string resolved_deck_text(const Deck& d, const std::vector<DeckKey>& table);

// "section.key=default" for every key this deck sets to other than its default where it
// has no effect (DeckKey::inert): the overrides that make it a deck load_deck accepts
// (the planner's "run it with" line, for a layout other than the deck's own).
std::vector<std::string> inert_key_resets(const Deck& d, const std::vector<DeckKey>& table);

// Throws a UserError when the deck's parallel layout does not fit its model and batch:
// sizes the tensor split must divide (Megatron 1D over t ranks; Optimus 2D over q x q),
// micro-batches, layers per pipeline stage. load_deck calls it; so does the planner for
// every layout it considers.
void check_model_fits_grid(const Deck& d, const std::string& origin);

}  // namespace strata
