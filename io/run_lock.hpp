#pragma once
// The advisory lock of a run directory: rank 0 of a job holds flock() on <dir>/lock for
// as long as it runs, and writes its host, pid and start time into the file. A second
// job on the same directory fails at once, naming the holder; the kernel releases the
// lock when the holder dies however it dies, so a stale file never blocks anyone.
#include <string>

#include "io/file_descriptor.hpp"

namespace strata {

class RunLock {
 public:
  // Throws UserError naming the holder when another process holds the lock, or naming
  // the path when the lock file cannot be created.
  explicit RunLock(const std::string& dir);

 private:
  FileDescriptor fd_;  // closing it releases the flock
};

}  // namespace strata
