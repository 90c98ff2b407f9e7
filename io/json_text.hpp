#pragma once
// A small strict JSON reader and the quoting its writers need: enough for the headers of
// model files from elsewhere (safetensors' header, a Hugging Face config.json). Nesting is
// bounded (64) and duplicate keys are refused, so a malformed or hostile header is one
// UserError naming the file and the offset, never a crash.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace strata {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string text;                                        // String; Number: its source text
  std::vector<JsonValue> items;                            // Array
  std::vector<std::pair<std::string, JsonValue>> members;  // Object, in the text's order

  // Object member by key (nullptr when absent or not an object).
  const JsonValue* find(const std::string& key) const;
  // A Number that is an integer written without fraction or exponent, in int64's range.
  bool is_integer() const;
  int64_t integer() const;  // std::stoll of text; call is_integer() first
};

// Parses text (all of it: trailing non-space is an error). `what` names the source in
// errors ("model.safetensors (its header)").
JsonValue parse_json(const std::string& text, const std::string& what);

// s as a JSON string literal, with its quotes.
std::string json_quote(const std::string& s);

}  // namespace strata
