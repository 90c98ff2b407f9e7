#include "io/file_globs.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <set>

#include "core/error.hpp"

namespace strata {

std::vector<std::string> expand_globs(const std::vector<std::string>& patterns, const std::string& key,
                                      const std::string& what, bool (*skip)(const std::string&)) {
  std::set<std::string> out;
  for (const auto& pat : patterns) {
    glob_t g{};
    const int rc = ::glob(pat.c_str(), GLOB_NOSORT, nullptr, &g);
    size_t matched = 0;
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        const std::string p = g.gl_pathv[i];
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (skip && skip(p))) continue;
        out.insert(p);
        ++matched;
      }
    }
    globfree(&g);
    if (matched == 0) throw UserError(key + ": '" + pat + "' matches no readable " + what);
  }
  return {out.begin(), out.end()};
}

}  // namespace strata
