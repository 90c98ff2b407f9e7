#pragma once
// One deck key as the key table declares it (deck_keys.hpp): its place, type, allowed
// values, description, and how it is set, read and checked on a Deck.
#include <functional>
#include <string>
#include <toml.hpp>

#include "core/deck.hpp"

namespace strata {

// What is wrong with one key's value: "must be >= 1", "must be an integer, got string".
struct KeyProblem {
  std::string why;
};

struct DeckKey {
  std::string section, name;
  std::string type;     // as the reference shows it: "integer", "number", "string", "boolean", "strings"
  std::string allowed;  // the range or the choices as text (">= 1", "in (0, 1)", "\"stop\", \"skip\""); "" for any
  std::string doc;      // one line
  // sets the key from a TOML value; throws KeyProblem for a value of the wrong type or
  // outside the choices
  std::function<void(Deck&, const toml::value&)> set;
  std::function<toml::value(const Deck&)> get;
  // "" when the deck's value is allowed, else why not ("must be >= 1")
  std::function<std::string(const Deck&)> problem;
  // "" when the key belongs to this deck's model, else why it does not ("applies to kind =
  // \"gpt\" only"): such a key is refused when the deck sets it, and not written in the
  // resolved deck
  std::function<std::string(const Deck&)> misplaced = [](const Deck&) { return std::string(); };
  // "" when the key acts in this deck's layout, else what it needs to act ("parallel.pipeline
  // > 1"): a value other than the default is then refused, as having no effect (the keys that
  // act in every deck keep the default, which says nothing)
  std::function<std::string(const Deck&)> inert = [](const Deck&) { return std::string(); };
};

struct DeckSection {
  std::string name, doc;
};

}  // namespace strata
