#include "core/toml_text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"

namespace strata {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// A character that may stand in a bare key or next to one in a dotted key ("a . b").
bool in_dotted_run(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '+' || c == ' ' || c == '\t';
}

// The length of the well-formed UTF-8 sequence at text[i] (1-4), or 0 if it is not one
// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t utf8_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return i + k < text.size() ? (unsigned char)text[i + k] : 0u; };
  const unsigned b0 = byte(0);
  const auto cont = [&](size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned b1 = byte(1);
    if ((b0 == 0xE0 && b1 < 0xA0) || (b0 == 0xED && b1 > 0x9F)) return 0;  // overlong, surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned b1 = byte(1);
    if ((b0 == 0xF0 && b1 < 0x90) || (b0 == 0xF4 && b1 > 0x8F)) return 0;  // overlong, > U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string read_toml_file(const std::string& path, const std::string& kind) {
  const std::string what = kind + " '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UserError("cannot open " + what + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw UserError(what + " is " + kind_of(st.st_mode) + ", not a regular file");
  // O_NONBLOCK: should the path have become a FIFO since, the open does not wait for a writer
  const FileDescriptor file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0) throw UserError("cannot open " + what + ": " + std::strerror(errno));
  if (::fstat(file.fd, &st) != 0) throw UserError("cannot read " + what + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw UserError(what + " is " + kind_of(st.st_mode) + ", not a regular file");
  const auto too_large = [&](int64_t bytes) {
    return UserError(what + " is larger than a " + kind + " can be (" + std::to_string(bytes) + " bytes; at most " +
                     std::to_string(kMaxTomlBytes) + ")");
  };
  if (st.st_size > kMaxTomlBytes) throw too_large(st.st_size);
  // read to the end, but never more than the bound: a file may grow, or report size 0 (/proc)
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(file.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UserError("cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (int64_t(text.size()) > kMaxTomlBytes) throw too_large(int64_t(text.size()));
  }
  return text;
}

void check_toml_text(const std::string& text, const std::string& origin) {
  // TOML is UTF-8; toml11 reads past the end of its buffer on some invalid sequences (a
  // literal string holding byte 0xff, found by fuzzing parse_deck), so none reaches it
  int64_t line = 1;
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_length(text, i);
    if (len == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", unsigned((unsigned char)text[i]));
      throw UserError(origin + ":" + std::to_string(line) + ": not valid TOML: not UTF-8 (byte " + hex + ")");
    }
    if (text[i] == '\n') ++line;
    i += len;
  }
  int depth = 0;     // open [ and { outside strings and comments
  int run_dots = 0;  // dots in the current dotted run (a dotted key: a."b".c)
  line = 1;
  const size_t n = text.size();
  const auto refuse = [&] {
    throw UserError(origin + ":" + std::to_string(line) + ": not valid TOML: nested more than " +
                    std::to_string(kMaxTomlNesting) + " levels deep (arrays, inline tables, dotted keys)");
  };
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '#') {  // a comment: to the end of the line
      while (i + 1 < n && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // a string, one component of a dotted run
      const bool multi = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
      const bool escapes = c == '"';
      i += multi ? 3 : 1;
      for (; i < n; ++i) {
        if (text[i] == '\n') ++line;
        if (escapes && text[i] == '\\') {
          if (i + 1 < n && text[i + 1] == '\n') ++line;
          ++i;
        } else if (text[i] == c && (!multi || (i + 2 < n && text[i + 1] == c && text[i + 2] == c))) {
          if (multi) {
            i += 2;
            while (i + 1 < n && text[i + 1] == c) ++i;  // """a"""" ends with a quote inside
          }
          break;
        } else if (!multi && text[i] == '\n') {
          break;  // an unterminated one-line string: the parser reports it
        }
      }
    } else if (c == '.') {
      if (++run_dots + depth >= kMaxTomlNesting) refuse();
    } else if (c == '[' || c == '{') {
      run_dots = 0;
      if (++depth + 1 >= kMaxTomlNesting) refuse();
    } else if (c == ']' || c == '}') {
      run_dots = 0;
      if (depth > 0) --depth;
    } else if (!in_dotted_run(c)) {
      run_dots = 0;
      if (c == '\n') ++line;
    }
  }
}

}  // namespace strata
