#pragma once
// Lists of files as decks name them: paths or shell globs, expanded, sorted (byte order)
// and deduplicated, so every rank and every run sees the same files in the same order.
#include <string>
#include <vector>

namespace strata {

// Regular files matching each pattern, minus those `skip` rejects. Throws UserError
// "KEY: 'PATTERN' matches no readable WHAT" for a pattern that matches none.
std::vector<std::string> expand_globs(const std::vector<std::string>& patterns, const std::string& key,
                                      const std::string& what, bool (*skip)(const std::string&) = nullptr);

}  // namespace strata
