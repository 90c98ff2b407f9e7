#pragma once
// A file of the source tree, for the unit tests: CTest sets STRATA_MACHINES_DIR to its
// machines/ folder (run by hand, from the source tree's root, the relative path serves).
#include <cstdlib>
#include <string>

namespace strata::test {

inline std::string source_file(const std::string& relative) {
  const char* dir = std::getenv("STRATA_MACHINES_DIR");
  return std::string(dir ? dir : "machines") + "/../" + relative;
}

}  // namespace strata::test
