#pragma once
// What differs between two resolved decks (Deck::resolved_toml), key by key: a restart
// compares the deck its checkpoint was written with to the deck it runs now.
#include <string>
#include <vector>

#include "core/deck_key.hpp"

namespace strata {

struct DeckChange {
  std::string key;     // "section.key"
  std::string before;  // TOML value in the first deck ("(absent)" when it has no such key)
  std::string after;   // in the second
};

// Every key whose value differs (or is in one deck only), sorted by section and key; a
// key the older deck does not write counts as its default in `table` (the whole key
// table: model/model_kind.hpp's model_deck_keys). Throws UserError when either text is
// not TOML (a damaged checkpoint attribute).
std::vector<DeckChange> deck_changes(const std::string& before_toml, const std::string& after_toml,
                                     const std::vector<DeckKey>& table);

}  // namespace strata
