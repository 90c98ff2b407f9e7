#include "io/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.hpp"

namespace strata {

RunLock::RunLock(const std::string& dir) {
  const std::string path = dir + "/lock";
  fd_ = FileDescriptor(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_.is_open())
    throw UserError("cannot create the run directory's lock file '" + path + "': " + std::strerror(errno));
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[256] = {0};
    const ssize_t n = ::pread(fd_.get(), holder, sizeof holder - 1, 0);
    std::string who(holder, size_t(std::max<ssize_t>(n, 0)));
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    fd_.close();
    if (err == EWOULDBLOCK)
      throw UserError("run directory '" + dir + "' is in use by another job (" +
                      (who.empty() ? "holder unknown" : who) +
                      "); give this run another run.name, or wait for that job to end");
    throw UserError("cannot lock the run directory '" + dir + "': " + std::strerror(err));
  }
  char host[128] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char when[64] = {0};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  const std::string who =
      std::string("host ") + host + ", pid " + std::to_string(::getpid()) + ", since " + when + "\n";
  if (::ftruncate(fd_.get(), 0) == 0) (void)!::pwrite(fd_.get(), who.data(), who.size(), 0);
}

}  // namespace strata
