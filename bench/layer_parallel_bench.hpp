#pragma once
// What the layer-parallel benches (mgrit_speedup, mgrit_gpt_speedup) measure alike.
#include <mpi.h>

#include <vector>

#include "comm/comm.hpp"
#include "comm/control.hpp"
#include "core/timers.hpp"

namespace strata {

// Seconds per call of f: the mean of `reps` calls after one (allocations), a batch of the
// model being many such calls; with `rounds` > 1 the fastest of that many such means, so
// that a busy minute of a shared machine skews neither the pieces nor the batches.
template <class F>
double seconds_per_call(F f, int reps, int rounds = 1) {
  f();
  Kokkos::fence();
  double best = 0;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = Timers::now();
    for (int i = 0; i < reps; ++i) f();
    Kokkos::fence();
    const double t = (Timers::now() - t0) / reps;
    if (r == 0 || t < best) best = t;
  }
  return best;
}

// One state of `values` values from rank 0 to rank 1 and back, `reps` times: half the
// fastest round trip, the same on every rank (0 on one rank).
template <class T>
double state_message_seconds(MPI_Comm world, int64_t values, int reps = 200) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  double seconds = 0;
  if (size >= 2 && rank < 2) {
    std::vector<T> buf(size_t(values), T(1));
    Comm pair(world);
    const auto send = [&](int peer) {
      auto r = pair.start_send(buf.data(), int64_t(buf.size()), peer, 0);
      pair.wait(r, "send");
    };
    const auto recv = [&](int peer) {
      auto r = pair.start_recv(buf.data(), int64_t(buf.size()), peer, 0);
      pair.wait(r, "recv");
    };
    barrier(world);
    for (int i = 0; i < reps; ++i) {
      const double t0 = MPI_Wtime();
      if (rank == 0) {
        send(1);
        recv(1);
      } else {
        recv(0);
        send(0);
      }
      const double t = (MPI_Wtime() - t0) / 2.0;
      if (i == 0 || t < seconds) seconds = t;
    }
  } else if (size >= 2) {
    barrier(world);
  }
  return broadcast_value(world, seconds, 0);
}

}  // namespace strata
