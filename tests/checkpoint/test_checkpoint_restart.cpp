// Checkpoint/restart: a run restarted from step k gives bit-identical losses for steps
// k+1..n on the same layout; a checkpoint written by N ranks restarts on 1 rank and
// continues the same trajectory; "latest" without a checkpoint starts fresh; only the
// newest keep_checkpoints files remain.
#include <mpi.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint_dir.hpp"
#include "core/deck.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;

namespace {

Deck ckpt_deck(int ranks, const std::string& name, int64_t steps, int64_t every) {
  return test::small_gpt_deck({"run.out_dir=checkpoint_test_runs", "run.val_every=0", "run.val_batches=1",
                               "run.seed=11", "run.keep_checkpoints=2", "optim.min_lr=3e-5", "optim.warmup_steps=2",
                               "optim.grad_clip=1.0", "parallel.data=" + std::to_string(ranks), "run.name=" + name,
                               "run.steps=" + std::to_string(steps), "run.checkpoint_every=" + std::to_string(every)});
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("restart reproduces the uninterrupted run, on this layout and on one rank", "[mpi][checkpoint]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string name = "np" + std::to_string(size);  // ctest runs np1/np2/np4 side by side
  if (rank == 0)
    for (const char* suffix : {"", "-resumed", "-fresh", "-serial"})
      std::filesystem::remove_all("checkpoint_test_runs/" + name + suffix);
  MPI_Barrier(MPI_COMM_WORLD);

  // the uninterrupted run, checkpointing every 4 steps (keep 2: steps 8 and 12 remain)
  const TrainResult full = Training(ckpt_deck(size, name, 12, 4), MPI_COMM_WORLD, test::quiet(true)).run();
  const std::string dir = "checkpoint_test_runs/" + name + "/checkpoints";
  const bool pruned =
      !exists(dir + "/ckpt_00000004.h5") && exists(dir + "/ckpt_00000008.h5") && exists(dir + "/ckpt_00000012.h5");
  std::string latest_name;
  std::ifstream(dir + "/LATEST") >> latest_name;

  // restart from step 8 on the same layout: steps 9..12 must be bit-identical
  const TrainResult resumed =
      Training(ckpt_deck(size, name + "-resumed", 12, 0), MPI_COMM_WORLD, test::quiet(true, dir + "/ckpt_00000008.h5"))
          .run();

  // "latest" where there is no checkpoint yet: a fresh run
  const TrainResult fresh =
      Training(ckpt_deck(size, name + "-fresh", 2, 0), MPI_COMM_WORLD, test::quiet(true, "latest")).run();

  CHECK(pruned);
  CHECK(latest_name == "ckpt_00000012.h5");
  CHECK(resumed.first_step == 8);
  REQUIRE(resumed.losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(resumed.losses[i] == full.losses[8 + i]);
  CHECK(fresh.first_step == 0);
  CHECK(fresh.losses.size() == 2);

  // a different layout: rank 0 alone restarts the N-rank checkpoint of step 8
  if (rank == 0) {
    const TrainResult serial =
        Training(ckpt_deck(1, name + "-serial", 12, 0), MPI_COMM_SELF, test::quiet(true, dir + "/ckpt_00000008.h5"))
            .run();
    REQUIRE(serial.losses.size() == 4);
    // same trajectory up to float summation order (see test_data_parallel)
    for (size_t i = 0; i < 4; ++i) CHECK(serial.losses[i] == Approx(full.losses[8 + i]).epsilon(1e-5));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
