#pragma once
// A deck's text before the TOML parser sees it: read only from a regular file of bounded
// size, and refused when it nests deeper than the parser can take. The parser (toml11)
// recurses once per level of arrays, inline tables and dotted keys, so a hostile or broken
// deck (`a = [[[[...` 200000 deep) would crash it with a stack overflow; a FIFO or
// /dev/zero would be read for ever. Each refusal is a one-line UserError naming the file.
#include <cstdint>
#include <string>

namespace strata {

constexpr int64_t kMaxDeckBytes = int64_t(1) << 20;  // a deck is a few kB
constexpr int kMaxDeckNesting = 64;                   // a deck nests 2 levels (section.key)

// The text of the deck file at `path`: refused (UserError) when it does not exist, is not
// a regular file (directory, device, FIFO, socket), is larger than kMaxDeckBytes, or
// cannot be read (the system's reason, e.g. "Input/output error").
std::string read_deck_file(const std::string& path);

// Refuses (UserError "origin:LINE: ...") TOML text that nests arrays, inline tables and
// dotted key components more than kMaxDeckNesting levels deep. Strings and comments are
// skipped as TOML lexes them, so brackets or dots inside them do not count.
void check_toml_nesting(const std::string& text, const std::string& origin);

}  // namespace strata
