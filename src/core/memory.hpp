#pragma once
// Process memory as the kernel reports it (Linux /proc/self/status), and the limits it
// enforces on this process: the rlimits (ulimit -d, -v: a batch system's per-process
// memory, PBS's pvmem) and the memory cgroup it runs in (Slurm's --mem, a container's).
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

// A limit on memory and where it comes from; bytes 0: none.
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;  // "ulimit -d", "ulimit -v" or "the memory cgroup /PATH"
};

// The tighter of this process's data and address-space rlimits (RLIMIT_DATA, RLIMIT_AS).
MemoryLimit process_memory_limit();
// The memory.max (cgroup v2) or memory.limit_in_bytes (v1) of the cgroup this process is
// in, and of its ancestors, the tightest; shared by every process in that cgroup.
MemoryLimit cgroup_memory_limit();

}  // namespace strata
