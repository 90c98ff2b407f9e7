#pragma once
// What the deck's key table (deck_keys.cpp) is declared with: reading a value from TOML
// and back, the rules of a key's allowed values, and the builders of a key (`key`,
// `enum_choice`, a model kind's own key, a key that acts only in some layouts). Included
// by deck_keys.cpp alone; the table itself is there.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/deck_key.hpp"

namespace strata::deck_key_builders {

// ---- values: reading one from TOML, and back --------------------------------------------

inline std::string type_of(const toml::value& v) {
  std::ostringstream os;
  os << v.type();
  return os.str();
}

// The integer literal as the deck wrote it ("18446744073709551616", "0xff", "1_000"), from
// the value's place in its source; empty when the value has none (made, not parsed).
inline std::string literal_of(const toml::value& v) {
  const auto loc = v.location();
  const std::string line = loc.line_str();
  if (loc.column() < 1 || loc.column() - 1 + loc.region() > line.size()) return {};
  return line.substr(loc.column() - 1, loc.region());
}

// Whether a TOML integer literal (sign, 0x/0o/0b prefix, underscores) fits in int64_t.
inline bool fits_int64(const std::string& literal) {
  size_t i = 0;
  bool negative = false;
  if (i < literal.size() && (literal[i] == '+' || literal[i] == '-')) negative = literal[i++] == '-';
  unsigned base = 10;
  if (literal.size() > i + 1 && literal[i] == '0' && std::strchr("xob", literal[i + 1])) {
    base = literal[i + 1] == 'x' ? 16 : literal[i + 1] == 'o' ? 8 : 2;
    i += 2;
  }
  using Wide = unsigned __int128;
  const Wide limit = Wide(INT64_MAX) + (negative ? 1 : 0);
  Wide x = 0;
  for (; i < literal.size(); ++i) {
    const char c = literal[i];
    if (c == '_') continue;
    const unsigned d = c >= '0' && c <= '9'   ? unsigned(c - '0')
                       : c >= 'a' && c <= 'f' ? unsigned(c - 'a' + 10)
                       : c >= 'A' && c <= 'F' ? unsigned(c - 'A' + 10)
                                              : base;
    if (d >= base) return true;  // not an integer literal after all: the parser judged it
    x = x * base + d;
    if (x > limit) return false;
  }
  return true;
}

// toml11 reads an integer that does not fit in 64 bits as INT64_MAX or INT64_MIN without
// a word (2^64 would have become "never"): such a literal is refused here, for every key.
inline int64_t integer_of(const toml::value& v) {
  if (!v.is_integer()) throw KeyProblem{"must be an integer, got " + type_of(v)};
  const int64_t x = v.as_integer();
  if (x == INT64_MAX || x == INT64_MIN) {
    const std::string literal = literal_of(v);
    if (!literal.empty() && !fits_int64(literal))
      throw KeyProblem{"must be an integer that fits in 64 bits, got " + literal};
  }
  return x;
}

inline void from_toml(const toml::value& v, int64_t& out) { out = integer_of(v); }
inline void from_toml(const toml::value& v, uint64_t& out) {
  const int64_t x = integer_of(v);
  if (x < 0) throw KeyProblem{"must be >= 0"};
  out = uint64_t(x);
}
inline void from_toml(const toml::value& v, double& out) {
  if (v.is_floating())
    out = v.as_floating();
  else if (v.is_integer())
    out = double(v.as_integer());
  else
    throw KeyProblem{"must be a number, got " + type_of(v)};
  if (!std::isfinite(out)) throw KeyProblem{"must be a finite number (got " + toml::format(v) + ")"};
}
inline void from_toml(const toml::value& v, bool& out) {
  if (!v.is_boolean()) throw KeyProblem{"must be true or false, got " + type_of(v)};
  out = v.as_boolean();
}
inline void from_toml(const toml::value& v, std::string& out) {
  if (!v.is_string()) throw KeyProblem{"must be a string, got " + type_of(v)};
  out = v.as_string();
}
inline void from_toml(const toml::value& v, std::vector<std::string>& out) {
  if (v.is_string()) {
    out = {v.as_string()};
    return;
  }
  if (!v.is_array()) throw KeyProblem{"must be an array of strings, got " + type_of(v)};
  out.clear();
  for (const auto& e : v.as_array()) {
    if (!e.is_string()) throw KeyProblem{"must be an array of strings, got " + type_of(v)};
    out.push_back(e.as_string());
  }
}

inline toml::value to_toml(int64_t x) { return toml::value(x); }
inline toml::value to_toml(uint64_t x) { return toml::value(int64_t(x)); }
inline toml::value to_toml(double x) { return toml::value(x); }
inline toml::value to_toml(bool x) { return toml::value(x); }
inline toml::value to_toml(const std::string& x) { return toml::value(x); }
inline toml::value to_toml(const std::vector<std::string>& x) {
  toml::array a;
  for (const auto& s : x) a.push_back(toml::value(s));
  return toml::value(a);
}

template <class T>
const char* type_name();
template <>
inline const char* type_name<int64_t>() {
  return "integer";
}
template <>
inline const char* type_name<uint64_t>() {
  return "integer";
}
template <>
inline const char* type_name<double>() {
  return "number";
}
template <>
inline const char* type_name<bool>() {
  return "boolean";
}
template <>
inline const char* type_name<std::string>() {
  return "string";
}
template <>
inline const char* type_name<std::vector<std::string>>() {
  return "strings";
}

// The shortest text that reads back to x; integers without an exponent.
inline std::string number_text(double x) {
  char buf[40];
  if (x == std::floor(x) && std::fabs(x) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", x);
    return buf;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}
inline std::string number_text(int64_t x) { return std::to_string(x); }

// ---- rules: the allowed values of one key ------------------------------------------------

template <class T>
struct Rule {
  std::string text;                  // as the reference shows it
  std::function<bool(const T&)> ok;  // null: any value
};

template <class T>
Rule<T> any() {
  return {"", nullptr};
}
template <class T>
Rule<T> at_least(T low) {
  return {">= " + number_text(low), [low](const T& v) { return v >= low; }};
}
inline Rule<int64_t> from_to(int64_t low, int64_t high) {
  return {"in [" + number_text(low) + ", " + number_text(high) + "]",
          [=](const int64_t& v) { return v >= low && v <= high; }};
}
inline Rule<double> above(double low) {
  return {"> " + number_text(low), [low](const double& v) { return v > low; }};
}
// low <= v < high, or low < v < high when low_open
inline Rule<double> below_from(double low, double high, bool low_open) {
  return {std::string(low_open ? "in (" : "in [") + number_text(low) + ", " + number_text(high) + ")",
          [=](const double& v) { return (low_open ? v > low : v >= low) && v < high; }};
}

// A name: letters, digits, '-' and '_', not empty (model.kind)
inline Rule<std::string> name_word() {
  return {"a name (letters, digits, - and _)", [](const std::string& v) {
            return !v.empty() && v.size() <= 64 && std::all_of(v.begin(), v.end(), [](char c) {
              return std::isalnum((unsigned char)c) || c == '-' || c == '_';
            });
          }};
}

inline std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }
// "\"a\", \"b\" or \"c\""
inline std::string choices_text(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + in_quotes(names[i]);
  return out;
}

// ---- declaring keys ----------------------------------------------------------------------

template <class Sec, class T>
DeckKey key(const char* section, Sec Deck::*sec, const char* name, T Sec::*field, Rule<T> rule, const char* doc) {
  DeckKey k;
  k.section = section;
  k.name = name;
  k.type = type_name<T>();
  k.allowed = rule.text;
  k.doc = doc;
  k.set = [sec, field](Deck& d, const toml::value& v) { from_toml(v, d.*sec.*field); };
  k.get = [sec, field](const Deck& d) { return to_toml(d.*sec.*field); };
  k.problem = [sec, field, rule](const Deck& d) {
    return !rule.ok || rule.ok(d.*sec.*field) ? std::string() : "must be " + rule.text;
  };
  return k;
}

// An enum key, read from the names the deck uses for its values (only those listed).
template <class Sec, class E>
DeckKey enum_choice(const char* section, Sec Deck::*sec, const char* name, E Sec::*field,
                    std::vector<std::pair<E, std::string>> names, const char* doc) {
  std::vector<std::string> words;
  for (const auto& n : names) words.push_back(n.second);
  DeckKey k;
  k.section = section;
  k.name = name;
  k.type = "string";
  k.allowed = choices_text(words);
  k.doc = doc;
  k.set = [sec, field, names, words](Deck& d, const toml::value& v) {
    std::string s;
    from_toml(v, s);
    for (const auto& [value, word] : names)
      if (word == s) {
        d.*sec.*field = value;
        return;
      }
    throw KeyProblem{"must be " + choices_text(words) + " (got " + in_quotes(s) + ")"};
  };
  k.get = [sec, field, names](const Deck& d) { return toml::value(name_in(names, d.*sec.*field)); };
  k.problem = [](const Deck&) { return std::string(); };
  return k;
}

// A key of one model kind (owner, named `title` in messages); every other kind refuses
// it. The kind `other` is told its own key for the same thing, `counterpart`, where it
// has one.
inline DeckKey for_kind(DeckKey k, const std::string& owner, const std::string& title, const std::string& other = "",
                        const std::string& counterpart = "") {
  const std::string kind = k.section == "model" ? "kind" : "model.kind";  // as the deck's reader sees it
  const std::string only = "applies to " + kind + " = \"" + owner + "\" only";
  const std::string hint = "is " + title + "'s: for " + kind + " = \"" + other + "\" use model." + counterpart;
  k.misplaced = [owner, other, counterpart, only, hint](const Deck& d) {
    if (d.model.kind == owner) return std::string();
    return !counterpart.empty() && d.model.kind == other ? hint : only;
  };
  return k;
}

// A key that acts only in decks where `acts` holds; elsewhere it needs `needs` (deck.cpp
// refuses a value other than its default there).
inline DeckKey acts_when(DeckKey k, std::function<bool(const Deck&)> acts, const std::string& needs) {
  k.inert = [acts, needs](const Deck& d) { return acts(d) ? std::string() : needs; };
  return k;
}
inline bool is_mgrit(const Deck& d) { return d.parallel.mgrit(); }
inline constexpr const char* kNeedsMgrit = "parallel.schedule = \"mgrit\"";
inline bool is_3d(const Deck& d) { return d.parallel.tensor_axonn(); }
inline constexpr const char* kNeeds3D = "parallel.tensor_mode = \"3d\"";

// parallel.schedule: a pipeline schedule's name (Layout::schedule), or "mgrit"
// (Layout::layer_method).
inline DeckKey schedule_key(const char* section, const char* doc) {
  std::vector<std::pair<Schedule, std::string>> pipeline = schedule_names();
  DeckKey k = enum_choice(section, &Deck::parallel, "schedule", &Layout::schedule, pipeline, doc);
  std::vector<std::string> words;
  for (const auto& n : pipeline) words.push_back(n.second);
  words.push_back("mgrit");
  k.allowed = choices_text(words);
  k.set = [pipeline, words](Deck& d, const toml::value& v) {
    std::string s;
    from_toml(v, s);
    d.parallel.layer_method = s == "mgrit" ? LayerMethod::MGRIT : LayerMethod::Pipeline;
    for (const auto& [value, word] : pipeline)
      if (word == s) d.parallel.schedule = value;
    if (s != "mgrit" && name_in(pipeline, d.parallel.schedule) != s)
      throw KeyProblem{"must be " + choices_text(words) + " (got " + in_quotes(s) + ")"};
  };
  k.get = [](const Deck& d) {
    return toml::value(d.parallel.mgrit() ? std::string("mgrit") : to_string(d.parallel.schedule));
  };
  return k;
}

}  // namespace strata::deck_key_builders
