// The machine's limit beside strata's step, in one run on one thread count: the fp32 and
// bf16 GEMM rates at each deck's own product shapes (model_gemm_rate: the limit the
// progress line's "% of gemm" and strata calibrate use; OpenBLAS for fp32, oneDNN for
// bf16) and at a large square shape, the memory bandwidth, and strata's whole training
// step (forward, backward and the AdamW update) in FLOP/s of the model's counted FLOPs
// (GPT::flops_per_token: 6 per parameter and token, and attention's 12 L T C), as a
// fraction of both GEMM rates. The GEMM rates and the steps are measured in turn,
// `--rounds` times, and each is the best seen (this VM's speed moves between minutes).
//
//   mpiexec -n 1 build/release/bench/limit --threads N [--steps 3] [--rounds 2] [--precision fp32|bf16]
//     [--set KEY=VALUE ...] [DECK ...]
//   (decks by default: inputs/bench-gpt-tiny.toml, inputs/bench-gpt-small.toml,
//    inputs/bench-gpt2-124m.toml, from the repository's root)
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/kokkos_start.hpp"
#include "core/blas_library.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/rank_threads.hpp"
#include "core/timers.hpp"
#include "kernels/gemm_probe.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "optim/optimizer_step.hpp"
#include "train/train_job.hpp"

using namespace strata;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Streaming bytes/s of a triad over 3 x 64 MiB on the rank's threads: the best of 8.
double triad_bandwidth() {
  const int64_t n = int64_t(16) << 20;
  Tensor1<float> a("limit.a", n), b("limit.b", n), c("limit.c", n);
  Kokkos::deep_copy(b, 1.0f);
  Kokkos::deep_copy(c, 2.0f);
  double best = 0;
  for (int rep = 0; rep < 8; ++rep) {
    const double t0 = Timers::now();
    Kokkos::parallel_for(
        "limit_triad", Range(0, n), KOKKOS_LAMBDA(const int64_t i) { a(i) = b(i) + 0.5f * c(i); });
    Kokkos::fence();
    if (rep > 0) best = std::max(best, 3.0 * double(n) * sizeof(float) / (Timers::now() - t0));
  }
  return best;
}

struct Row {
  double model_gemm = 0, square_gemm = 0, step_seconds = 1e30, flops_per_step = 0;
};

Row measure(const std::string& path, std::vector<std::string> overrides, Precision precision, int steps, int rounds) {
  overrides.push_back(std::string("model.precision=\"") + to_string(precision) + "\"");
  Deck deck = load_model_deck(path, overrides);
  deck.run.steps = int64_t(rounds) * (steps + 1);
  JobOptions quiet;
  quiet.print = false;
  quiet.probe_gemm = false;
  TrainJob job(deck, MPI_COMM_WORLD, quiet);
  auto* gpt = dynamic_cast<GPT<float>*>(&job.model());
  if (!gpt) throw UserError("bench/limit measures GPT decks: " + path);
  Row r;
  r.flops_per_step = gpt->flops_per_token() * double(deck.data.batch_size * deck.model.seq_len);
  OptimizerStep<float> update(deck.optim, deck.run.steps, job.optimizer_groups());
  Timers timers;
  int64_t step = 0;
  for (int round = 0; round < rounds; ++round) {
    r.model_gemm = std::max(r.model_gemm, model_gemm_rate(deck, precision, 0.2));
    r.square_gemm = std::max(r.square_gemm, 1e9 * measure_gemm_gflops(2048, 2048, 2048, 0.5, precision));
    job.train_round(step++, 1, update, timers, [] { return false; });  // warm: the round's first step
    for (int s = 0; s < steps; ++s) {
      Kokkos::fence();
      const double t0 = Timers::now();
      job.train_round(step++, 1, update, timers, [] { return false; });
      Kokkos::fence();
      r.step_seconds = std::min(r.step_seconds, Timers::now() - t0);
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // the kernels strata itself runs with (core/blas_library.hpp)
  if (const std::string core = better_blas_core(); !core.empty()) restart_with_blas_core(core, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int code = 0;
  {
    int ranks = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    KokkosStart kokkos(argc, argv, 0);
    if (!kokkos.error().empty() || ranks != 1) {  // one rank: the step and the GEMM rates on the same cores
      if (rank == 0)
        std::fprintf(
            stderr, "limit: %s\n",
            ranks != 1 ? "measures one rank (mpiexec -n 1; --threads N for its cores)" : kokkos.error().c_str());
      code = 2;
    } else {
      int steps = 3, rounds = 2;
      std::string only;  // --precision fp32 or bf16: that one alone
      std::vector<std::string> decks, overrides;
      const auto& args = kokkos.args();
      for (size_t i = 1; i < args.size(); ++i) {
        const std::string a = args[i];
        if (a == "--steps" && i + 1 < args.size()) {
          steps = std::atoi(args[++i]);
        } else if (a == "--set" && i + 1 < args.size()) {
          overrides.push_back(args[++i]);
        } else if (a == "--rounds" && i + 1 < args.size()) {
          rounds = std::atoi(args[++i]);
        } else if (a == "--precision" && i + 1 < args.size()) {
          only = args[++i];
        } else {
          decks.push_back(a);
        }
      }
      if (decks.empty())
        decks = {"inputs/bench-gpt-tiny.toml", "inputs/bench-gpt-small.toml", "inputs/bench-gpt2-124m.toml"};
      std::vector<Precision> precisions;
      if (only != "bf16") precisions.push_back(Precision::FP32);
      if (only != "fp32" && kernels::bf16_products_unavailable().empty()) precisions.push_back(Precision::BF16);
      try {
        if (!only.empty() && only != "fp32" && only != "bf16")
          throw std::invalid_argument("--precision " + only + ": fp32 or bf16");
        std::printf("%s, %d thread(s) (BLAS: %s, %s); streaming %.1f GB/s\n", cpu_model().c_str(), rank_threads(),
                    blas_core_name().c_str(), blas_threading().c_str(), triad_bandwidth() / 1e9);
        std::printf(
            "| deck | precision | ms/step | step GFLOP/s | GEMM at its shapes GFLOP/s | step / GEMM | 2048^3 GEMM "
            "GFLOP/s | step / 2048^3 |\n|---|---|---|---|---|---|---|---|\n");
        for (const auto& path : decks)
          for (const Precision p : precisions) {
            const Row r = measure(path, overrides, p, steps, rounds);
            const double step = r.flops_per_step / r.step_seconds;
            std::printf("| %s | %s | %.1f | %.1f | %.1f | %.0f%% | %.1f | %.0f%% |\n", path.c_str(),
                        to_string(p).c_str(), 1e3 * r.step_seconds, step / 1e9, r.model_gemm / 1e9,
                        100 * step / r.model_gemm, r.square_gemm / 1e9, 100 * step / r.square_gemm);
            std::fflush(stdout);
          }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "limit: %s\n", e.what());
        code = 2;
      }
    }
  }
  MPI_Finalize();
  return code;
}
