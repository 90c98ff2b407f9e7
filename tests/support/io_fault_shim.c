/* An LD_PRELOAD library for the fault tests: makes chosen file-system calls fail the way
 * a full disk, an exceeded quota or a broken mount does, on one rank or all.
 *   STRATA_FAULT_OP     write | fsync | rename   (write covers write, pwrite, pwrite64 and
 *                       fflush: the C library's streams write through internal calls)
 *   STRATA_FAULT_ERRNO  EIO (default) | ENOSPC | EDQUOT
 *   STRATA_FAULT_PATH   the call fails only on files whose path contains this text
 *                       (rename: the source path); default ".h5.tmp"
 *   STRATA_FAULT_RANK   only the process whose PMI_RANK (set by MPICH's mpiexec) is this
 *   STRATA_FAULT_AFTER  let this many matching calls through first (default 0)
 * Anything else passes through to the C library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int enabled_for(const char* op) {
  const char* want = getenv("STRATA_FAULT_OP");
  if (!want || strcmp(want, op) != 0) return 0;
  const char* rank = getenv("STRATA_FAULT_RANK");
  const char* mine = getenv("PMI_RANK");
  if (rank && *rank && (!mine || strcmp(rank, mine) != 0)) return 0;
  return 1;
}

static int matches(const char* path) {
  const char* pattern = getenv("STRATA_FAULT_PATH");
  if (!pattern || !*pattern) pattern = ".h5.tmp";
  return path && strstr(path, pattern) != NULL;
}

static int fd_matches(int fd) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return matches(path);
}

/* A matching call: fails once STRATA_FAULT_AFTER matching calls have passed. */
static int should_fail(int matched) {
  static int passed = 0;
  if (!matched) return 0;
  const char* after = getenv("STRATA_FAULT_AFTER");
  if (after && passed < atoi(after)) {
    ++passed;
    return 0;
  }
  return 1;
}

static int fault_errno(void) {
  const char* e = getenv("STRATA_FAULT_ERRNO");
  if (e && strcmp(e, "ENOSPC") == 0) return ENOSPC;
  if (e && strcmp(e, "EDQUOT") == 0) return EDQUOT;
  return EIO;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void* buf, size_t count) {
  if (enabled_for("write") && should_fail(fd_matches(fd))) {
    errno = fault_errno();
    return -1;
  }
  return NEXT(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  if (enabled_for("write") && should_fail(fd_matches(fd))) {
    errno = fault_errno();
    return -1;
  }
  return NEXT(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  if (enabled_for("write") && should_fail(fd_matches(fd))) {
    errno = fault_errno();
    return -1;
  }
  return NEXT(pwrite64)(fd, buf, count, offset);
}

int fflush(FILE* stream) {
  if (stream && enabled_for("write") && should_fail(fd_matches(fileno(stream)))) {
    errno = fault_errno();
    return EOF;
  }
  return NEXT(fflush)(stream);
}

int fsync(int fd) {
  if (enabled_for("fsync") && should_fail(fd_matches(fd))) {
    errno = fault_errno();
    return -1;
  }
  return NEXT(fsync)(fd);
}

int fdatasync(int fd) {
  if (enabled_for("fsync") && should_fail(fd_matches(fd))) {
    errno = fault_errno();
    return -1;
  }
  return NEXT(fdatasync)(fd);
}

int rename(const char* from, const char* to) {
  if (enabled_for("rename") && should_fail(matches(from))) {
    errno = fault_errno();
    return -1;
  }
  return NEXT(rename)(from, to);
}
