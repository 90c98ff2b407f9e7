#pragma once
// Process memory as the kernel reports it (Linux /proc/self/status).
#include <cstdint>
#include <fstream>
#include <string>

namespace strata {

// Peak resident set size in bytes (VmHWM), 0 if unknown.
inline int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

}  // namespace strata
