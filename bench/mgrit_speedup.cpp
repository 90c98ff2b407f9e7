// The layer-parallel cost model (src/engine/layer_parallel/mgrit_cost.hpp: the solver's
// schedule replayed on every rank, whose step and message counts the tests check against
// the solver's own, rank by rank) turned into time with this machine's cost of one
// residual step forward, adjoint, and adjoint with gradients (batch 100, width 64,
// measured here) and of one state message (a ping-pong when run on 2 ranks):
//   serial        open + N t_f + close + N t_g
//   layer-par.    open + forward solve (t_f, t_m) + close + adjoint solve (t_a, t_m)
//                 + (largest block) t_g
// with each solve's time the replay's critical path over the ranks. It checks itself
// against LayerParallel's measured time per batch on this machine (1 and 2 ranks), and
// predicts the speedup for N = 1024 at P = 16 .. 1024 with the best number of levels.
//
//   mpiexec -n 2 build/release/bench/mgrit_speedup [--steps 64] [--cfactor 4] [--levels 2]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "comm/comm.hpp"
#include "comm/control.hpp"
#include "core/timers.hpp"
#include "engine/layer_parallel/layer_parallel.hpp"
#include "engine/layer_parallel/mgrit_cost.hpp"
#include "layer_parallel_bench.hpp"
#include "model/resnet.hpp"
#include "model/resnet_steps.hpp"

using namespace strata;

namespace {

LayerStepTimes measure(int64_t batch, int64_t width, MPI_Comm world) {
  ResNetConfig cfg;
  cfg.width = width;
  cfg.steps = 4;
  ResNet<double> net(cfg, 1);
  StepScratch<double> s;
  Tensor2<double> u("u", batch, width), v("v", batch, width), x("x", batch, cfg.inputs), logits("l", batch, 10);
  Tensor1<double> lse("lse", batch), losses("losses", batch);
  Tensor1<int32_t> labels("labels", batch);
  Kokkos::deep_copy(u, 0.1);
  Kokkos::deep_copy(x, 0.5);
  LayerStepTimes t;
  t.forward = seconds_per_call([&] { net.step_forward(0, 0.1, u, v, s); }, 400);
  t.adjoint = seconds_per_call([&] { net.step_adjoint(0, 0.1, u, v, u, s, false); }, 400);
  t.gradient = seconds_per_call([&] { net.step_adjoint(0, 0.1, u, v, u, s, true); }, 400);
  t.serial_step = t.forward + t.gradient;  // the serial network's backward remakes each step's product too
  t.open = seconds_per_call([&] { net.open_forward(x, u); }, 100) +
           seconds_per_call([&] { net.open_backward(x, u, s); }, 100);
  t.close = seconds_per_call(
      [&] {
        net.close_forward(u, labels, logits, lse, losses);
        net.close_backward(u, labels, 0.01, logits, lse, v);
      },
      100);
  t.message = state_message_seconds<double>(world, batch * width);  // a ping-pong between ranks 0 and 1
  return t;
}

double serial_time(int64_t n, const LayerStepTimes& t) { return serial_network_seconds(n, t); }

double parallel_time(int64_t n, int ranks, const LayerParallelOptions& o, const LayerStepTimes& t) {
  return layer_parallel_seconds(n, ranks, o.forward, o.backward, t);
}

// The model against LayerParallel on this machine: the serial network and MGRIT on 1, 2, 4,
// ... ranks (each row the first p ranks' job).
void check_against_layer_parallel(int64_t n, int64_t batch, int64_t width, const LayerParallelOptions& o,
                                  const LayerStepTimes& t, int rank, int size) {
  ResNetConfig cfg;
  cfg.width = width;
  cfg.steps = n;
  Tensor2<double> x("x", batch, cfg.inputs);
  Tensor1<int32_t> labels("labels", batch);
  Kokkos::deep_copy(x, 0.3);
  if (rank == 0)
    std::printf("\nN = %lld, c = %d, %d levels, %d forward / %d backward iterations:\n", (long long)n,
                o.forward.cfactor, o.forward.levels, o.forward.max_iterations, o.backward.max_iterations);
  if (rank == 0) std::printf("| ranks | solver | predicted ms/batch | measured ms/batch |\n|---|---|---|---|\n");
  for (int p = 1; p <= size; p *= 2) {
    for (const bool mgrit : {false, true}) {
      LayerParallelOptions run = o;
      if (!mgrit) run.forward.levels = run.backward.levels = 1;
      int64_t unit = 1;
      for (int l = 1; l < run.forward.levels; ++l) unit *= run.forward.cfactor;
      if (n % unit != 0 || n < p) continue;
      MPI_Comm sub = first_ranks(MPI_COMM_WORLD, p);  // the first p ranks' job
      double measured = 0;
      if (sub != MPI_COMM_NULL) {
        Layout layers;
        layers.pipeline = p;
        const Grid grid(layers, sub);
        ResNet<double> net(cfg, 1, StagePlacement::balanced(int(n), p, rank));
        attach_steps(net);
        LayerParallel<double> engine(net, grid, batch, run);
        engine.forward_backward(x, labels, batch);
        const int reps = 10;
        barrier(sub);
        const double t0 = Timers::now();
        for (int i = 0; i < reps; ++i) engine.forward_backward(x, labels, batch);
        measured = (Timers::now() - t0) / reps;
        free_ranks(sub);
      }
      barrier(MPI_COMM_WORLD);
      if (rank == 0)
        std::printf("| %d | %s | %.2f | %.2f |\n", p, mgrit ? "MGRIT" : "sequential (levels = 1)",
                    1e3 * parallel_time(n, p, run, t), 1e3 * measured);
    }
  }
}

// The prediction beyond this machine: N = 1024, this machine's step and message times.
void predict_deep_network(const LayerParallelOptions& o, const LayerStepTimes& t) {
  const int64_t big = 1024;
  std::printf(
      "\npredicted, N = %d, c = %d, %d forward / %d backward iterations, this machine's step and message "
      "times:\n| ranks P | steps per rank | best levels | ms per batch | speedup over serial "
      "|\n|---|---|---|---|---|\n",
      int(big), o.forward.cfactor, o.forward.max_iterations, o.backward.max_iterations);
  const double serial = serial_time(big, t);
  std::printf("| 1 (serial network) | %d | - | %.1f | 1.00 |\n", int(big), 1e3 * serial);
  for (int p = 16; p <= 1024; p *= 2) {
    double best = 0;
    int best_levels = 0;
    for (int levels = 2; levels <= 11; ++levels) {
      int64_t unit = 1;
      for (int l = 1; l < levels; ++l) unit *= o.forward.cfactor;
      if (big % unit != 0) break;
      LayerParallelOptions run = o;
      run.forward.levels = run.backward.levels = levels;
      const double tp = parallel_time(big, p, run, t);
      if (best_levels == 0 || tp < best) {
        best = tp;
        best_levels = levels;
      }
    }
    std::printf("| %d | %d | %d | %.2f | %.1f |\n", p, int(big / p), best_levels, 1e3 * best, serial / best);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;  // Kokkos' and the BLAS's OpenMP threads never call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    int64_t n = 64, batch = 100, width = 64;
    LayerParallelOptions o;
    o.forward.levels = o.backward.levels = 2;
    o.forward.cfactor = o.backward.cfactor = 4;
    o.forward.max_iterations = 2;
    o.backward.max_iterations = 1;
    o.forward.tolerance = o.backward.tolerance = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--steps") n = std::atoll(argv[i + 1]);
      if (a == "--cfactor") o.forward.cfactor = o.backward.cfactor = std::atoi(argv[i + 1]);
      if (a == "--levels") o.forward.levels = o.backward.levels = std::atoi(argv[i + 1]);
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const LayerStepTimes t = measure(batch, width, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf(
          "measured (batch %lld, width %lld, double): step forward %.1f us, adjoint %.1f us, adjoint + "
          "gradient %.1f us, opening %.1f us, closing %.1f us, one state message %.1f us%s\n",
          (long long)batch, (long long)width, t.forward * 1e6, t.adjoint * 1e6, t.gradient * 1e6, t.open * 1e6,
          t.close * 1e6, t.message * 1e6, size < 2 ? " (1 rank: not measured)" : "");
    check_against_layer_parallel(n, batch, width, o, t, rank, size);
    if (rank == 0) predict_deep_network(o, t);
  }
  MPI_Finalize();
  return 0;
}
