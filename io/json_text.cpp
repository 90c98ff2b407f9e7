#include "io/json_text.hpp"

#include <cerrno>
#include <cstdlib>

#include "core/error.hpp"

namespace strata {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  JsonValue document() {
    JsonValue v = value(0);
    space();
    if (i_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw UserError(what_ + ": malformed JSON at byte " + std::to_string(i_) + ": " + why);
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    size_t n = 0;
    while (w[n]) ++n;
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }

  JsonValue value(int depth) {
    if (depth >= kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth));
    space();
    if (i_ >= s_.size()) fail("unexpected end");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = JsonValue::Kind::Object;
      if (eat('}')) return v;
      do {
        space();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a key");
        std::string key = string();
        if (v.find(key)) fail("duplicate key \"" + key + "\"");
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = JsonValue::Kind::Array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.text = string();
    } else if (word("true")) {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = JsonValue::Kind::Bool;
    } else if (word("null")) {
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::Number;
      const size_t b = i_;
      if (s_[i_] == '-') ++i_;
      const auto digits = [&] {
        const size_t d = i_;
        while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        if (i_ == d) fail("a number without digits");
      };
      digits();
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        digits();
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        digits();
      }
      v.text = s_.substr(b, i_ - b);
      v.number = std::strtod(v.text.c_str(), nullptr);
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            if (!(word("\\u"))) fail("a lone surrogate");
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("a lone surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("a lone surrogate");
          }
          utf8(cp, out);
          break;
        }
        default:
          fail(std::string("unknown escape \\") + e);
      }
    }
  }
  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("a short \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= uint32_t(h - 'A' + 10);
      else
        fail("a bad \\u escape");
    }
    return v;
  }
  static void utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

bool JsonValue::is_integer() const {
  if (kind != Kind::Number || text.find_first_of(".eE") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

int64_t JsonValue::integer() const { return std::strtoll(text.c_str(), nullptr, 10); }

JsonValue parse_json(const std::string& text, const std::string& what) { return Parser(text, what).document(); }

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace strata
