// Ring attention's load balance: each rank's computation and waiting in one forward and
// backward of ring attention over all ranks, with the zigzag split the runs use and with
// the plain contiguous split for comparison (context_parallel.hpp). Under the causal mask
// the contiguous split gives rank r r+1 blocks of work (the last rank X times the first's
// diagonal share); the zigzag gives every rank the same.
//
//   OPENBLAS_NUM_THREADS=1 mpiexec -n X build/release/bench/ring_attention_balance
//       [T] [heads] [head_size] [fp32|bf16] [repetitions]
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/control.hpp"
#include "comm/grid.hpp"
#include "core/rng.hpp"
#include "kernels/matmul_bf16.hpp"
#include "parallel/ring_attention.hpp"

using namespace strata;

namespace {

double waited(const Comm& ring) {
  double s = 0;
  for (const auto& [kind, st] : ring.stats()) s += st.seconds;
  return s;
}

// (seconds of the calls, of them waiting in MPI) for `reps` forwards and backwards
std::pair<double, double> run(Comm& ring, bool zigzag, int64_t t_full, int64_t h, int64_t hs, Precision precision,
                              int reps) {
  ContextParallel cp;
  cp.ring = &ring;
  cp.size = ring.size();
  cp.rank = ring.rank();
  cp.zigzag = zigzag;
  const int64_t t = t_full / cp.size, c = h * hs;
  Tensor2<float> qkv("qkv", t, 3 * c), out("out", t, c), lse("lse", h, t), dout("dout", t, c), dqkv("dqkv", t, 3 * c);
  auto hq = Kokkos::create_mirror_view(qkv);
  auto hd = Kokkos::create_mirror_view(dout);
  for (int64_t i = 0; i < t * 3 * c; ++i) hq.data()[i] = float(counter_normal(7, uint64_t(cp.rank), uint64_t(i)));
  for (int64_t i = 0; i < t * c; ++i) hd.data()[i] = float(counter_normal(8, uint64_t(cp.rank), uint64_t(i)));
  Kokkos::deep_copy(qkv, hq);
  Kokkos::deep_copy(dout, hd);
  ContextWorkspace<float> ws;
  kernels::ProductWorkspace products;  // as a model's
  const kernels::ProductPrecision p(precision, true, &products);
  const auto call = [&] {
    ring_attention_forward<float>(cp, ws, out, lse, qkv, 1, t, h, p);
    ring_attention_backward<float>(cp, ws, dqkv, qkv, out, lse, dout, 1, t, h, p);
  };
  call();  // warm
  barrier(ring.raw());
  const double w0 = waited(ring), t0 = MPI_Wtime();
  for (int r = 0; r < reps; ++r) call();
  return {MPI_Wtime() - t0, waited(ring) - w0};
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    const int64_t t_full = argc > 1 ? std::atoll(argv[1]) : 8192, h = argc > 2 ? std::atoll(argv[2]) : 6,
                  hs = argc > 3 ? std::atoll(argv[3]) : 64;
    const Precision precision = argc > 4 && std::string(argv[4]) == "bf16" ? Precision::BF16 : Precision::FP32;
    const int reps = argc > 5 ? std::atoi(argv[5]) : 3;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (precision == Precision::BF16 && !kernels::bf16_products_unavailable().empty()) {
      if (rank == 0) std::fprintf(stderr, "bf16: %s\n", kernels::bf16_products_unavailable().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (size < 2 || t_full % (2 * size) != 0) {
      if (rank == 0) std::fprintf(stderr, "run on 2 or more ranks, with T a multiple of 2 x ranks\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    {
      Layout layout;
      layout.context = size;
      const Grid grid(layout, MPI_COMM_WORLD);
      Comm& ring = grid.context();
      if (rank == 0)
        std::printf(
            "ring attention, T = %lld over %d ranks, %lld heads of %lld, %s, forward + backward, ms per call:\n",
            (long long)t_full, size, (long long)h, (long long)hs, precision == Precision::BF16 ? "bf16" : "fp32");
      for (const bool zigzag : {true, false}) {
        const auto [seconds, wait] = run(ring, zigzag, t_full, h, hs, precision, reps);
        std::vector<double> all(2 * size_t(size), 0.0);  // (time, computing) of every rank
        all[2 * size_t(rank)] = 1e3 * seconds / reps;
        all[2 * size_t(rank) + 1] = 1e3 * (seconds - wait) / reps;
        sum_over(MPI_COMM_WORLD, all);
        if (rank == 0) {
          double lo = 1e300, hi = 0;
          for (int r = 0; r < size; ++r) {
            std::printf("  %-10s rank %d: %8.1f ms, computing %8.1f ms\n", zigzag ? "zigzag" : "contiguous", r,
                        all[2 * size_t(r)], all[2 * size_t(r) + 1]);
            lo = std::min(lo, all[2 * size_t(r) + 1]);
            hi = std::max(hi, all[2 * size_t(r) + 1]);
          }
          std::printf("  %-10s busiest / least busy rank: %.2f\n", zigzag ? "zigzag" : "contiguous", hi / lo);
        }
      }
    }
  }
  MPI_Finalize();
  return 0;
}
