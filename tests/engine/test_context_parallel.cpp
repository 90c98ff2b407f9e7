// Context parallelism (parallel.context): the GPT trained with each sequence split over
// 2 and 4 ranks (ring attention, the zigzag chunks) gives the serial run's losses,
// validation losses and final parameters; alone, with gradient accumulation, selective
// and full recomputation, with data parallelism and ZeRO-1, with pipelines (GPipe, 1F1B,
// ZB-H1, ZB-H2, interleaved; XPipe in test_xpipe.cpp), with 1D tensor parallelism (with
// sequence parallelism in test_tensor_parallel.cpp and here on 8 ranks), with the 2D
// code path and (8 ranks) the 2D 2x2 split. A checkpoint
// written on context 2 restarts on context 1 and 4 (and one from 1 on 2) to the same
// losses: checkpoints hold global tensors. What each run sent on the context group is
// what the model declares (the traffic formula).
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// seq_len 16: chunks of 4 tokens on 2 ranks, of 2 on 4.
Deck context_deck(const std::vector<std::string>& overrides, const std::string& name = "context", int64_t steps = 8,
                  int64_t every = 0) {
  std::vector<std::string> all = {"run.out_dir=context_test_runs",
                                  "run.val_every=4",
                                  "run.val_batches=1",
                                  "run.seed=5",
                                  "model.n_layer=4",
                                  "run.name=" + name,
                                  "run.steps=" + std::to_string(steps),
                                  "run.checkpoint_every=" + std::to_string(every)};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

std::vector<std::vector<std::string>> context_layouts_for(int n) {
  const std::string c2 = "parallel.context=2", p2 = "parallel.pipeline=2";
  switch (n) {
    case 2:
      return {{c2},
              {c2, "parallel.context_mode=all-to-all"},
              {c2, "parallel.micro_batches=2"},
              {c2, "parallel.recompute=selective"},
              {c2, "parallel.recompute=full"},
              {c2, "parallel.tensor_mode=2d"}};
    case 4:
      return {{"parallel.context=4"},
              {"parallel.context=4", "parallel.context_mode=all-to-all"},
              {"parallel.data=2", c2, "parallel.context_mode=all-to-all", "parallel.zero=1"},
              {c2, p2, "parallel.micro_batches=4", "parallel.schedule=1f1b", "parallel.context_mode=all-to-all"},
              {"parallel.data=2", c2},
              {"parallel.data=2", c2, "parallel.zero=1"},
              {c2, p2, "parallel.micro_batches=4", "parallel.schedule=gpipe"},
              {c2, p2, "parallel.micro_batches=4", "parallel.schedule=1f1b"},
              {c2, p2, "parallel.micro_batches=4", "parallel.schedule=zb-h1"},
              {c2, p2, "parallel.micro_batches=4", "parallel.schedule=zb-h2"},
              {c2, p2, "parallel.micro_batches=4", "parallel.schedule=interleaved", "parallel.virtual_stages=2"},
              {c2, "parallel.tensor_cols=2"}};
    case 8:
      return {{c2, "parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2"},
              {"parallel.data=2", c2, "parallel.tensor_cols=2", "parallel.sequence_parallel=true"}};
    default:
      return {};
  }
}

}  // namespace

TEST_CASE("context parallelism on 2 and 4 ranks equals the serial run", "[mpi][context]") {
  const int n = world_size(), rank = world_rank();
  const auto layouts = context_layouts_for(n);
  if (layouts.empty()) return;
  const auto [ser, ser_params] = serial_run<Training>(context_deck({}));
  for (const auto& layout : layouts) {
    Training par(context_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = global_params_of(par);
    if (rank == 0) {
      INFO(describe(layout) << " on " << n << " ranks");
      REQUIRE(r.losses.size() == ser.losses.size());
      const double worst = max_rel_diff(r.losses, ser.losses);
      REQUIRE(r.val.size() == ser.val.size());
      for (size_t s = 0; s < r.val.size(); ++s) CHECK(r.val[s].second == Approx(ser.val[s].second).epsilon(3e-7));
      std::printf("context equivalence, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                  describe(layout).c_str(), n, worst, max_abs_diff(params, ser_params));
      // float sums in another order (attention's keys in ring order, dK and dV summed
      // round the ring, the gradients over data x context): the pipeline tests' bounds
      CHECK(worst < 3e-7);
      CHECK(max_abs_diff(params, ser_params) < 5e-5);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a checkpoint written on context 2 restarts on context 1 and 4, one from context 1 on 2",
          "[mpi][context][checkpoint]") {
  if (world_size() != 4) return;
  const int rank = world_rank();
  if (rank == 0) std::filesystem::remove_all("context_test_runs");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> two = {"parallel.data=2", "parallel.context=2", "parallel.zero=1"};
  const TrainResult full = Training(context_deck(two, "ckpt-c2", 10, 5), MPI_COMM_WORLD, quiet(true)).run();
  const std::string ckpt = "context_test_runs/ckpt-c2/checkpoints/ckpt_00000005.h5";
  const auto check_rest = [&](const TrainResult& r) {
    CHECK(r.first_step == 5);
    REQUIRE(r.losses.size() == 5);
    for (size_t i = 0; i < 5; ++i) CHECK(r.losses[i] == Approx(full.losses[5 + i]).epsilon(3e-7));
  };
  check_rest(
      Training(context_deck({"parallel.context=4"}, "from-c2-c4", 10), MPI_COMM_WORLD, quiet(false, ckpt)).run());
  if (rank == 0) check_rest(Training(context_deck({}, "from-c2-c1", 10), MPI_COMM_SELF, quiet(false, ckpt)).run());
  MPI_Barrier(MPI_COMM_WORLD);
  // the other way: written on one rank, restarted on context 2
  if (rank == 0) Training(context_deck({}, "ckpt-c1", 10, 5), MPI_COMM_SELF, quiet(true)).run();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
  if (pair != MPI_COMM_NULL) {
    check_rest(Training(context_deck({"parallel.context=2"}, "from-c1-c2", 10), pair,
                        quiet(false, "context_test_runs/ckpt-c1/checkpoints/ckpt_00000005.h5"))
                   .run());
    MPI_Comm_free(&pair);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
