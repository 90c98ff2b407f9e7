// The softmax regression (model.kind = "softmax", the third model kind) under the one job
// and the data-parallel engine: data parallelism, micro-batches and ZeRO-1 give the serial
// run's losses, test losses and accuracies and final parameters (the residual network's
// tolerances: float sums in another order).
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model_kind.hpp"
#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

Deck softmax_deck(const std::vector<std::string>& overrides) {
  const std::string text = R"(
[run]
steps = 6
val_every = 3
val_batches = 1
seed = 9
[model]
kind = "softmax"
init_std = 0.05
[data]
kind = "images"
batch_size = 16
[optim]
lr = 1e-2
warmup_steps = 2
grad_clip = 1.0
)";
  std::vector<std::string> with_data = {"data.dir=" + test_image_dir()};  // a slice of Fashion-MNIST
  with_data.insert(with_data.end(), overrides.begin(), overrides.end());
  return parse_model_deck(text, "softmax test deck", with_data);
}

}  // namespace

TEST_CASE("the softmax regression's data-parallel runs equal its serial run", "[mpi][softmax]") {
  const int n = world_size(), rank = world_rank();
  TrainResult ser;
  std::vector<double> ser_params;
  if (rank == 0) {
    Training serial(softmax_deck({}), MPI_COMM_SELF, quiet());
    ser = serial.run();
    ser_params = global_params_of(serial);
  }
  const std::string d = "parallel.data=" + std::to_string(n);
  for (const auto& layout :
       std::vector<std::vector<std::string>>{{d}, {d, "parallel.micro_batches=2"}, {d, "parallel.zero=1"}}) {
    Training par(softmax_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = global_params_of(par);
    if (rank != 0) continue;
    INFO(describe(layout) << " on " << n << " ranks");
    const double worst = compare_runs(r, ser);
    std::printf("softmax equivalence, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                describe(layout).c_str(), n, worst, max_abs_diff(params, ser_params));
    CHECK(worst < 3e-7);
    CHECK(max_abs_diff(params, ser_params) < 5e-5);
    // it learns: the validation loss (the same batch each time) falls
    REQUIRE(ser.val.size() == 2);
    CHECK(ser.val.back().second < ser.val.front().second);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("the softmax regression restarts from its checkpoint", "[mpi][softmax][checkpoint]") {
  const int n = world_size(), rank = world_rank();
  const std::string name = "np" + std::to_string(n);  // ctest runs np1/np2/np4 side by side
  const auto deck = [&](const std::string& run, int ranks, int64_t every) {
    return softmax_deck({"run.out_dir=softmax_test_runs", "run.name=" + run, "parallel.data=" + std::to_string(ranks),
                         "run.checkpoint_every=" + std::to_string(every), "parallel.zero=1"});
  };
  if (rank == 0)
    for (const char* suffix : {"", "-resumed", "-serial"})
      std::filesystem::remove_all("softmax_test_runs/" + name + suffix);
  MPI_Barrier(MPI_COMM_WORLD);
  const TrainResult full = Training(deck(name, n, 3), MPI_COMM_WORLD, quiet(true)).run();
  const std::string ckpt = "softmax_test_runs/" + name + "/checkpoints/ckpt_00000003.h5";
  const TrainResult resumed = Training(deck(name + "-resumed", n, 0), MPI_COMM_WORLD, quiet(true, ckpt)).run();
  CHECK(resumed.first_step == 3);
  REQUIRE(resumed.losses.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(resumed.losses[i] == full.losses[3 + i]);
  REQUIRE(!resumed.accuracy.empty());
  CHECK(resumed.accuracy.back() == full.accuracy.back());
  if (rank == 0) {  // another layout reads the n-rank (ZeRO-1) checkpoint
    const TrainResult serial = Training(deck(name + "-serial", 1, 0), MPI_COMM_SELF, quiet(true, ckpt)).run();
    REQUIRE(serial.losses.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(serial.losses[i] == Approx(full.losses[3 + i]).epsilon(1e-6));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
