#pragma once
// The text of a TOML input (a deck, a machine file, a checkpoint's stored deck) before the
// parser sees it: read only from a regular file of bounded size, and refused when it nests
// deeper than the parser can take, or is not UTF-8. The parser (toml11) recurses once per level of arrays,
// inline tables and dotted keys, so a hostile or broken file (`a = [[[[...` 200000 deep)
// would crash it with a stack overflow; a FIFO or /dev/zero would be read for ever. Each
// refusal is a one-line UserError naming the file.
#include <cstdint>
#include <string>

namespace strata {

constexpr int64_t kMaxTomlBytes = int64_t(1) << 20;  // a deck or machine file is a few kB
constexpr int kMaxTomlNesting = 64;                  // both nest 2 levels (section.key)

// The text of the file at `path`, `what` it is ("deck", "machine file") naming it in
// errors: refused (UserError) when it does not exist, is not a regular file (directory,
// device, FIFO, socket), is larger than kMaxTomlBytes, or cannot be read (the system's
// reason, e.g. "Input/output error").
std::string read_toml_file(const std::string& path, const std::string& what);

// Refuses (UserError "origin:LINE: not valid TOML: ...") text that is not UTF-8, or that
// nests arrays, inline tables and dotted key components more than kMaxTomlNesting levels
// deep. Strings and comments are skipped as TOML lexes them, so brackets or dots inside
// them do not count.
void check_toml_text(const std::string& text, const std::string& origin);

}  // namespace strata
