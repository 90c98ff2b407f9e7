#include "core/deck_changes.hpp"

#include <cmath>
#include <map>
#include <sstream>
#include <toml.hpp>

#include "core/deck_keys.hpp"
#include "core/error.hpp"
#include "core/toml_text.hpp"

namespace strata {
namespace {

// section.key -> formatted value, for every key of every table section, sorted
std::vector<std::pair<std::string, std::string>> flatten(const std::string& text, const char* which) {
  // std::map tables: keys in a fixed (sorted) order, so "the first key that differs" is stable
  toml::basic_value<toml::discard_comments, std::map, std::vector> root;
  try {
    check_toml_text(text, std::string("the ") + which + " deck");
    std::istringstream is(text);
    root = toml::parse<toml::discard_comments, std::map, std::vector>(is, which);
  } catch (const std::exception&) {
    throw UserError(std::string("the ") + which + " deck is not valid TOML");
  }
  std::vector<std::pair<std::string, std::string>> out;
  if (!root.is_table()) return out;
  for (const auto& [section, table] : root.as_table()) {
    if (!table.is_table()) continue;
    for (const auto& [key, value] : table.as_table()) {
      // a whole number reads the same written as 1 or 1.0 (older resolved decks wrote 1)
      const bool whole = value.is_floating() && value.as_floating() == std::floor(value.as_floating()) &&
                         std::fabs(value.as_floating()) < 1e15;
      std::string v = whole ? std::to_string(int64_t(value.as_floating())) : toml::format(value);
      while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
      out.emplace_back(section + "." + key, v);
    }
  }
  return out;
}

// Every key's default, formatted as flatten() formats a deck's values.
std::map<std::string, std::string> defaults(const std::vector<DeckKey>& table) {
  const Deck d;
  std::string text;
  for (const auto& s : deck_sections()) {
    text += "[" + s.name + "]\n";
    for (const auto& k : table)
      if (k.section == s.name) text += k.name + " = " + format_deck_value(k.get(d)) + "\n";
  }
  const auto flat = flatten(text, "default");
  return std::map<std::string, std::string>(flat.begin(), flat.end());
}

}  // namespace

std::vector<DeckChange> deck_changes(const std::string& before_toml, const std::string& after_toml,
                                     const std::vector<DeckKey>& table) {
  const auto values = defaults(table);
  const auto before = flatten(before_toml, "checkpoint's");
  const auto after = flatten(after_toml, "current");
  std::map<std::string, std::string> old(before.begin(), before.end());
  std::vector<DeckChange> out;
  for (const auto& [key, value] : after) {
    const auto it = old.find(key);
    if (it == old.end()) {  // a key the older deck does not write (it did not apply, or did not exist) had its default
      const auto d = values.find(key);
      if (d == values.end() || d->second != value) out.push_back({key, "(absent)", value});
    } else if (it->second != value) {
      out.push_back({key, it->second, value});
    }
  }
  return out;
}

}  // namespace strata
