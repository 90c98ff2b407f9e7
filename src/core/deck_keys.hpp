#pragma once
// Every deck key, declared once: its section and name, type, default (the value in a
// default-constructed Deck), allowed values and a one-line description. This table drives
// reading a deck (deck.cpp), the range checks, the resolved deck written to the run
// directory, and the key reference (`strata deck --reference`, docs/deck.md). Rules that
// tie several keys together are in deck_reading.cpp (check_cross_keys); their text is in the
// descriptions here.
#include <functional>
#include <string>
#include <toml.hpp>
#include <vector>

#include "core/deck_key.hpp"

namespace strata {

using DeckKeys = std::vector<DeckKey>;

const std::vector<DeckSection>& deck_sections();
// The keys every deck has, whatever its model, in section order, then in the order the
// reference lists them. A model kind declares its own keys (model/model_kind.hpp), which
// the core knows only as keys: the whole table is merge_deck_keys of the two.
const DeckKeys& core_deck_keys();
// The core's keys and `kind_keys` (in their order), section by section: each section's
// core keys, then its kind keys.
DeckKeys merge_deck_keys(const DeckKeys& kind_keys);

// A value as the resolved deck and the reference write it: integers plainly, numbers in
// the shortest form that reads back to the same double, strings quoted, lists in brackets.
std::string format_deck_value(const toml::value& v);

// The reference of every key of `table` (section, key, type, default, allowed values,
// what it does) as Markdown: `strata deck --reference` prints it; docs/deck.md is its output.
std::string deck_reference(const DeckKeys& table);

}  // namespace strata
