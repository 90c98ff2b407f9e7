#include "core/memory.hpp"

#include <sys/resource.h>

#include <sstream>

namespace strata {
namespace {

// A cgroup file's number ("max", a missing file, or a v1 "no limit" of ~2^63: 0).
int64_t cgroup_bytes(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    const long double v = std::stold(text);
    return v <= 0 || v >= 1e18L ? 0 : int64_t(v);
  } catch (const std::exception&) {
    return 0;
  }
}

void take_tighter(MemoryLimit& best, int64_t bytes, const std::string& source) {
  if (bytes > 0 && (best.bytes == 0 || bytes < best.bytes)) best = {bytes, source};
}

}  // namespace

MemoryLimit process_memory_limit() {
  MemoryLimit out;
  for (const auto& [resource, name] : {std::pair{RLIMIT_DATA, "ulimit -d"}, std::pair{RLIMIT_AS, "ulimit -v"}}) {
    rlimit r{};
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY) take_tighter(out, int64_t(r.rlim_cur), name);
  }
  return out;
}

MemoryLimit cgroup_memory_limit() {
  // lines "0::/PATH" (v2) or "N:memory:/PATH" (v1, also "N:cpu,memory:/PATH")
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  MemoryLimit out;
  while (std::getline(in, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    const bool v2 = controllers.empty();
    if (!v2 && ("," + controllers + ",").find(",memory,") == std::string::npos) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const std::string file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
    // the cgroup and each ancestor below the mount (a limit set higher up holds too)
    while (true) {
      take_tighter(out, cgroup_bytes(root + (path == "/" ? "" : path) + file), "the memory cgroup " + path);
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
      if (path.empty()) path = "/";
    }
  }
  return out;
}

}  // namespace strata
