// The layer-parallel cost model (src/engine/layer_parallel/mgrit_cost.hpp) for the GPT's
// blocks (model/gpt_layer_steps.hpp), from this machine's measured cost of one block as a
// step forward, as an adjoint step (its forward again, then its input half) and as a step
// of the gradient pass (forward and the whole backward), of the opening part (embedding,
// open buffer) and the closing part (close buffer, head, loss) forward and backward, of
// one (B, T, C) state message (a ping-pong, on 2 ranks or more) and of the serial GPT's
// forward and backward.
//
// It checks itself against LayerParallel's time per batch on the job's ranks, sequential
// and MGRIT: run it at 1, 2 and 4 ranks. The pieces are timed as the run meets them: the
// solves' steps on rank 0 while the other ranks wait polling MPI (with more ranks than
// cores they take turns on its core, as in the run), the gradient pass's step on every rank
// at once (the slowest rank). This machine's speed moves (2x between minutes, seen), so the
// pieces and the batches are measured in turn, 5 rounds, each the fastest seen.
//
// Then it predicts the speed-up over the serial network of GPTs of 64, 256 and 1024 blocks
// of width 384 and 1024 on 16 to 1024 ranks, a core per rank (block times measured here at
// those widths with the other ranks idle, the best number of levels).
//
//   for n in 1 2 4; do mpiexec -n $n build/release/bench/mgrit_gpt_speedup; done
//   options: [--layers 18] [--width 128] [--batch 4] [--seq 64] [--levels 2] [--cfactor 2]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "comm/comm.hpp"
#include "comm/control.hpp"
#include "core/timers.hpp"
#include "engine/layer_parallel/layer_parallel.hpp"
#include "engine/layer_parallel/mgrit_cost.hpp"
#include "layer_parallel_bench.hpp"
#include "model/gpt.hpp"
#include "model/gpt_layer_steps.hpp"

using namespace strata;

namespace {

ModelConfig gpt_of(int64_t layers, int64_t width, int64_t seq) {
  ModelConfig m;
  m.n_layer = layers;
  m.n_embd = width;
  m.n_head = std::max<int64_t>(1, width / 64);
  m.vocab_size = 256;
  m.seq_len = seq;
  return m;
}

SampleBatch<float> batch_of(const Tensor1<int32_t>& tokens, int64_t samples) {
  SampleBatch<float> b;
  b.samples = samples;
  b.tokens = tokens;
  b.targets = tokens;
  return b;
}

// The block's times, measured by rank 0 while the other ranks wait: polling MPI as the
// solver's ranks wait for a message (under the test shim they yield, but with more ranks
// than cores they still take turns on rank 0's core, as in the run), or idly (a core's
// own speed); and the message between ranks 0 and 1.
LayerStepTimes measure(int64_t layers, int64_t width, int64_t batch, int64_t seq, int open, int close, int reps,
                       int rounds, bool idle_waiters, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  LayerStepTimes t;
  if (rank == 0) {
    const ModelConfig m = gpt_of(layers, width, seq);
    Tensor1<int32_t> tokens("tokens", batch * seq);
    Kokkos::deep_copy(tokens, 7);
    const SampleBatch<float> b = batch_of(tokens, batch);
    GPT<float> lp(m, 1, {}, StagePlacement::layer_steps(int(layers), open, close, 1, 0));
    attach_layer_steps(lp);
    OdeNetwork<float>& steps = *lp.ode_network();
    Tensor2<float> u("u", batch, steps.state_size()), v("v", batch, steps.state_size());
    Kokkos::deep_copy(u, 0.1f);
    t.forward = seconds_per_call([&] { steps.step_forward(0, 1.0f, u, v); }, reps, rounds);
    t.adjoint = seconds_per_call([&] { steps.step_adjoint(0, 1.0f, u, v, u, false); }, reps, rounds);
    t.gradient = seconds_per_call([&] { steps.step_adjoint(0, 1.0f, u, v, u, true); }, reps, rounds);
    t.open = seconds_per_call(
        [&] {
          steps.open_forward(b, u);
          steps.open_backward(b, v);
        },
        reps, rounds);
    t.close = seconds_per_call(
        [&] {
          steps.close_forward(u, b);
          steps.close_backward(u, b, 1e-3f, v);
        },
        reps, rounds);
    GPT<float> serial(m, 1);
    const BlockContext ctx{batch, seq};
    const double whole = seconds_per_call(
        [&] {
          serial.forward(ctx, tokens, tokens);
          serial.backward(ctx, 1e-3f);
        },
        reps, rounds);
    t.serial_step = std::max(0.0, whole - t.open - t.close) / double(layers - open - close);
  }
  if (idle_waiters) idle_barrier(world);
  for (double* x : {&t.forward, &t.adjoint, &t.gradient, &t.open, &t.close, &t.serial_step})
    *x = broadcast_value(world, *x, 0);
  t.message = state_message_seconds<float>(world, batch * seq * width);
  return t;
}

// One step of the gradient pass with every rank computing its own at once, as the pass
// runs (each rank its block, together; two busy cores of a virtual machine, or more ranks
// than cores, run slower than one): the slowest rank's time, on every rank.
double busy_gradient_seconds(int64_t width, int64_t batch, int64_t seq, int reps, int rounds, MPI_Comm world) {
  const ModelConfig m = gpt_of(4, width, seq);
  GPT<float> lp(m, 1, {}, StagePlacement::layer_steps(4, 0, 0, 1, 0));
  attach_layer_steps(lp);
  OdeNetwork<float>& steps = *lp.ode_network();
  Tensor2<float> u("u", batch, steps.state_size()), v("v", batch, steps.state_size());
  Kokkos::deep_copy(u, 0.1f);
  barrier(world);
  const double t = seconds_per_call([&] { steps.step_adjoint(0, 1.0f, u, v, u, true); }, reps, rounds);
  return Comm(world).allreduce_max(t);
}

// Each time the faster of a and b: the machine's speed when it was least disturbed.
LayerStepTimes fastest(const LayerStepTimes& a, const LayerStepTimes& b) {
  LayerStepTimes f;
  f.forward = std::min(a.forward, b.forward);
  f.adjoint = std::min(a.adjoint, b.adjoint);
  f.gradient = std::min(a.gradient, b.gradient);
  f.open = std::min(a.open, b.open);
  f.close = std::min(a.close, b.close);
  f.message = std::min(a.message, b.message);
  f.serial_step = std::min(a.serial_step, b.serial_step);
  return f;
}

int levels_fitting(int64_t steps, int cfactor, int most) {
  int levels = 1;
  int64_t unit = cfactor;
  while (levels < most && steps % unit == 0 && steps / unit >= 1) {
    ++levels;
    unit *= cfactor;
  }
  return levels;
}

// The bench's sizes and solver, from the command line.
struct Setup {
  int64_t layers = 18, width = 128, batch = 4, seq = 64;
  int open = 1, close = 1;
  LayerParallelOptions o;
  Setup(int argc, char** argv) {
    o.forward.levels = o.backward.levels = 2;
    o.forward.cfactor = o.backward.cfactor = 2;
    o.forward.max_iterations = 2;
    o.backward.max_iterations = 1;
    o.forward.tolerance = o.backward.tolerance = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--layers") layers = std::atoll(argv[i + 1]);
      if (a == "--width") width = std::atoll(argv[i + 1]);
      if (a == "--batch") batch = std::atoll(argv[i + 1]);
      if (a == "--seq") seq = std::atoll(argv[i + 1]);
      if (a == "--levels") o.forward.levels = o.backward.levels = std::atoi(argv[i + 1]);
      if (a == "--cfactor") o.forward.cfactor = o.backward.cfactor = std::atoi(argv[i + 1]);
    }
  }
  int64_t steps() const { return layers - open - close; }
};

// The model against LayerParallel on this machine, on the job's own ranks only: ranks left
// out of a row would wait beside it and, with more ranks than cores, take turns on the
// row's cores (run the job at 1, 2 and 4 ranks).
void check_against_layer_parallel(const Setup& su, const LayerStepTimes& t, int rank, int size) {
  const LayerParallelOptions& o = su.o;
  const int64_t n = su.steps();
  const ModelConfig m = gpt_of(su.layers, su.width, su.seq);
  Tensor1<int32_t> tokens("tokens", su.batch * su.seq);
  Kokkos::deep_copy(tokens, 7);
  if (rank == 0)
    std::printf(
        "\n%lld blocks (%lld MGRIT steps between buffers of %d and %d), c = %d, %d levels, %d forward / %d backward "
        "iterations; %d cores:\n| ranks | solver | predicted ms/batch | measured ms/batch | measured / predicted "
        "|\n|---|---|---|---|---|\n",
        (long long)su.layers, (long long)n, su.open, su.close, o.forward.cfactor, o.forward.levels,
        o.forward.max_iterations, o.backward.max_iterations, int(std::thread::hardware_concurrency()));
  if (rank == 0) std::printf("| 1 | serial network | %.2f | - | - |\n", 1e3 * serial_network_seconds(n, t));
  const int p = size;
  for (const bool mgrit : {false, true}) {
    LayerParallelOptions run = o;
    if (!mgrit) run.forward.levels = run.backward.levels = 1;
    if (mgrit && levels_fitting(n, run.forward.cfactor, run.forward.levels) < run.forward.levels) continue;
    if (n < p) continue;
    Layout layout;
    layout.pipeline = p;
    layout.layer_method = LayerMethod::MGRIT;
    const Grid grid(layout, MPI_COMM_WORLD);
    GPT<float> model(m, 1, {}, StagePlacement::layer_steps(int(su.layers), su.open, su.close, p, rank));
    attach_layer_steps(model);
    LayerParallel<float> engine(model, grid, su.batch, run);
    const SampleBatch<float> b = batch_of(tokens, su.batch);
    // this machine's speed moves (2x between minutes, seen): the step times and the batches
    // in turn, 5 rounds, each the fastest seen
    LayerStepTimes tt;
    double measured = 0, gradient = 0;
    for (int round = 0; round < 5; ++round) {
      const LayerStepTimes tr =
          measure(su.layers, su.width, su.batch, su.seq, su.open, su.close, 24, 1, false, MPI_COMM_WORLD);
      const double gr = busy_gradient_seconds(su.width, su.batch, su.seq, 12, 1, MPI_COMM_WORLD);
      barrier(MPI_COMM_WORLD);
      const double mr =
          broadcast_value(MPI_COMM_WORLD, seconds_per_call([&] { engine.forward_backward(b, su.batch); }, 1, 2), 0);
      tt = round == 0 ? tr : fastest(tt, tr);
      gradient = round == 0 ? gr : std::min(gradient, gr);
      measured = round == 0 ? mr : std::min(measured, mr);
    }
    tt.gradient = gradient;
    const double predicted = layer_parallel_seconds(n, p, run.forward, run.backward, tt);
    if (rank == 0)
      std::printf("| %d | %s | %.2f | %.2f | %.2f |\n", p, mgrit ? "MGRIT" : "sequential (levels = 1)",
                  1e3 * predicted, 1e3 * measured, measured / predicted);
  }
}

// Beyond this machine: deep GPTs, this machine's block and message times at their widths.
void predict_deep_gpts(const Setup& su, int rank) {
  const LayerParallelOptions& o = su.o;
  if (rank == 0)
    std::printf(
        "\npredicted speed-up over the serial network (B=%lld, T=%lld, c = %d, %d forward / %d backward "
        "iterations, no buffers, the best number of levels; a rank per core):\n| blocks | width | ranks | "
        "steps per rank | best levels | ms per batch | serial ms | speed-up |\n|---|---|---|---|---|---|---|---|\n",
        (long long)su.batch, (long long)su.seq, o.forward.cfactor, o.forward.max_iterations,
        o.backward.max_iterations);
  for (const int64_t w : {int64_t(384), int64_t(1024)}) {
    const LayerStepTimes tw = measure(4, w, su.batch, su.seq, 0, 0, 2, 1, true, MPI_COMM_WORLD);  // every block a step
    for (const int64_t steps : {int64_t(64), int64_t(256), int64_t(1024)}) {
      const double serial = serial_network_seconds(steps, tw);
      for (int p = 16; p <= 1024 && p <= steps; p *= 2) {
        double best = 0;
        int best_levels = 0;
        for (int levels = 2; levels <= levels_fitting(steps, o.forward.cfactor, 12); ++levels) {
          LayerParallelOptions run = o;
          run.forward.levels = run.backward.levels = levels;
          const double tp = layer_parallel_seconds(steps, p, run.forward, run.backward, tw);
          if (best_levels == 0 || tp < best) best = tp, best_levels = levels;
        }
        if (rank == 0 && best_levels > 0)
          std::printf("| %lld | %lld | %d | %lld | %d | %.1f | %.1f | %.2f |\n", (long long)steps, (long long)w, p,
                      (long long)((steps + p - 1) / p), best_levels, 1e3 * best, 1e3 * serial, serial / best);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    const Setup su(argc, argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const LayerStepTimes t =
        measure(su.layers, su.width, su.batch, su.seq, su.open, su.close, 20, 1, true, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf(
          "measured (GPT block C=%lld, %lld heads, B=%lld, T=%lld, fp32, 1 thread): step forward %.2f ms, adjoint "
          "%.2f ms, gradient pass %.2f ms, serial forward + backward %.2f ms; opening %.2f ms, closing %.2f ms; one "
          "state (%.2f MiB) %.3f ms%s\n",
          (long long)su.width, (long long)std::max<int64_t>(1, su.width / 64), (long long)su.batch, (long long)su.seq,
          t.forward * 1e3, t.adjoint * 1e3, t.gradient * 1e3, t.serial_step * 1e3, t.open * 1e3, t.close * 1e3,
          double(su.batch * su.seq * su.width * 4) / (1 << 20), t.message * 1e3,
          size < 2 ? " (1 rank: not measured)" : "");
    check_against_layer_parallel(su, t, rank, size);
    predict_deep_gpts(su, rank);
  }
  MPI_Finalize();
  return 0;
}
