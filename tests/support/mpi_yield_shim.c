/* An LD_PRELOAD library for the test suite: MPI ranks that wait give up the processor.
 *
 * CTest runs 4- and 8-rank jobs on a 2-core machine. MPICH's ch4 device (Debian's is
 * ch4:ucx) waits by polling and never yields, so a rank waiting for a message from a rank
 * that is not scheduled spins for its whole time slice: every collective then costs
 * milliseconds, and the oversubscribed tests ran 2-3x longer than their work (Open MPI
 * has mpi_yield_when_idle for this; MPICH 4.0's ch4 has no such setting). This wraps
 * UCX's ucp_worker_progress, which MPICH's progress loop calls on every poll, and yields
 * when a poll found nothing to do. It changes when ranks run, never what they compute:
 * results are bit for bit the same. With another MPI (no UCX) it is never called.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>

typedef unsigned (*progress_fn)(void *worker);

unsigned ucp_worker_progress(void *worker) {
  static progress_fn real;
  if (!real) real = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
  const unsigned events = real(worker);
  if (events == 0) sched_yield();
  return events;
}
