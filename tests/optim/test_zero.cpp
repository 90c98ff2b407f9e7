// ZeRO-1 (parallel.zero = 1): the AdamW moments split over the data ranks, gradients
// reduce-scattered, parameters all-gathered. Against the serial run of the same deck (the
// data-parallel tolerances: float sums in another order), on 2 and 4 ranks, alone and with
// accumulation, pipeline and tensor parallelism, and for the residual network; each rank
// keeps 1/data of the moments. Checkpoints stay global datasets: a ZeRO-1 checkpoint holds
// the moments a plain run's does, restarts bit for bit on its own layout, without ZeRO on
// one rank and with ZeRO-1 on another layout; a plain checkpoint restarts under ZeRO-1.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

Deck zero_gpt_deck(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"run.steps=10", "run.val_every=5", "run.val_batches=1", "run.seed=23"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

std::vector<std::vector<std::string>> zero_layouts_for(int n) {
  switch (n) {
    case 2:
      return {{"parallel.data=2", "parallel.zero=1"},
              {"parallel.data=2", "parallel.micro_batches=2", "parallel.zero=1"}};
    case 4:
      return {{"parallel.data=4", "parallel.zero=1"},
              {"parallel.data=2", "parallel.pipeline=2", "parallel.micro_batches=2", "parallel.zero=1"},
              {"parallel.data=2", "parallel.tensor_cols=2", "parallel.zero=1"}};
    default:
      return {};
  }
}

// Every value of a checkpoint's moment datasets, in the store's tensor order.
std::vector<double> checkpoint_moments(const std::string& path, const ParamStore<float>& store) {
  CheckpointReader r(path);
  std::vector<double> out;
  for (const auto& p : store.infos())
    for (const std::string group : {"/optim/adam_m/", "/optim/adam_v/"}) {
      std::vector<float> values(size_t(p.global_numel));
      r.read_tensor(group + p.name, values.data());
      out.insert(out.end(), values.begin(), values.end());
    }
  return out;
}

}  // namespace

TEST_CASE("ZeRO-1 equals the serial run, alone and with accumulation, pipeline and tensor parallelism", "[mpi][zero]") {
  const int n = world_size(), rank = world_rank();
  if (n == 1) return;  // one data rank: nothing to split
  const auto [ser, ser_params] = serial_run<Training>(zero_gpt_deck({}));
  for (const auto& layout : zero_layouts_for(n)) {
    const Deck d = zero_gpt_deck(layout);
    Training par(d, MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = global_params_of(par);
    // this rank keeps the moments of 1/data of its (padded) flat buffers
    auto& store = par.model().params();
    const int data = int(d.parallel.data);
    CHECK(store.zero().moments_sharded());
    CHECK(int64_t(store.zero().adam_m().extent(0)) == zero_block(store.numel(), data));
    CHECK(store.state_bytes() == store_values(store.numel(), data) * int64_t(sizeof(float)));
    if (rank == 0) {
      INFO(describe(layout) << " on " << n << " ranks");
      REQUIRE(r.losses.size() == ser.losses.size());
      const double worst = max_rel_diff(r.losses, ser.losses);
      std::printf("zero-1, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n", describe(layout).c_str(),
                  n, worst, max_abs_diff(params, ser_params));
      CHECK(worst < 3e-7);  // the data-parallel tests' tolerances
      CHECK(max_abs_diff(params, ser_params) < 5e-5);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("the residual network with ZeRO-1 equals its serial run", "[mpi][zero]") {
  const int n = world_size(), rank = world_rank();
  if (n == 1) return;
  const auto [ser, ser_params] = serial_run<Training>(small_resnet_deck({}));
  const std::vector<std::string> layout =
      n == 2 ? std::vector<std::string>{"parallel.data=2", "parallel.zero=1"}
             : std::vector<std::string>{"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=gpipe",
                                        "parallel.micro_batches=2", "parallel.zero=1"};
  Training par(small_resnet_deck(layout), MPI_COMM_WORLD, quiet());
  const TrainResult r = par.run();
  const auto params = global_params_of(par);
  CHECK(par.model().params().zero().moments_sharded());
  if (rank == 0) {
    INFO(describe(layout) << " on " << n << " ranks");
    REQUIRE(r.losses.size() == ser.losses.size());
    const double worst = max_rel_diff(r.losses, ser.losses);
    std::printf("resnet zero-1, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                describe(layout).c_str(), n, worst, max_abs_diff(params, ser_params));
    CHECK(worst < 3e-7);
    CHECK(max_abs_diff(params, ser_params) < 5e-5);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a ZeRO-1 checkpoint is a global one: it restarts on its layout, without ZeRO and on another layout",
          "[mpi][zero][checkpoint]") {
  const int n = world_size(), rank = world_rank();
  if (n == 1) return;
  const std::string base = "zero_test_runs/np" + std::to_string(n);  // ctest runs np2/np4 side by side
  if (rank == 0) std::filesystem::remove_all(base);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto deck = [&](const std::string& name, int64_t every, std::vector<std::string> layout) {
    std::vector<std::string> all = {"run.out_dir=" + base,
                                    "run.name=" + name,
                                    "run.steps=12",
                                    "run.val_every=0",
                                    "run.checkpoint_every=" + std::to_string(every),
                                    "run.keep_checkpoints=3"};
    all.insert(all.end(), layout.begin(), layout.end());
    return zero_gpt_deck(all);
  };
  const std::vector<std::string> zero = {"parallel.data=" + std::to_string(n), "parallel.zero=1"};
  const std::vector<std::string> plain = {"parallel.data=" + std::to_string(n)};
  const std::string zero_ckpt = base + "/zero/checkpoints/ckpt_00000008.h5";
  const std::string plain_ckpt = base + "/plain/checkpoints/ckpt_00000008.h5";

  Training zero_run(deck("zero", 4, zero), MPI_COMM_WORLD, quiet(true));
  const TrainResult full = zero_run.run();
  const TrainResult plain_full = Training(deck("plain", 4, plain), MPI_COMM_WORLD, quiet(true)).run();
  // restarts: the same ZeRO layout (bit for bit), a plain checkpoint under ZeRO-1
  const TrainResult resumed = Training(deck("resumed", 0, zero), MPI_COMM_WORLD, quiet(true, zero_ckpt)).run();
  const TrainResult from_plain = Training(deck("from-plain", 0, zero), MPI_COMM_WORLD, quiet(true, plain_ckpt)).run();
  // another layout with ZeRO-1 (other blocks): on 4 ranks 2 data x 2 stages, on 2 ranks 2 tensor columns (no ZeRO)
  const std::vector<std::string> other = n == 4
                                             ? std::vector<std::string>{"parallel.data=2", "parallel.pipeline=2",
                                                                        "parallel.micro_batches=2", "parallel.zero=1"}
                                             : std::vector<std::string>{"parallel.tensor_cols=2"};
  const TrainResult moved = Training(deck("moved", 0, other), MPI_COMM_WORLD, quiet(true, zero_ckpt)).run();

  REQUIRE(resumed.losses.size() == 4);
  REQUIRE(from_plain.losses.size() == 4);
  REQUIRE(moved.losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(resumed.losses[i] == full.losses[8 + i]);
    CHECK(from_plain.losses[i] == Approx(plain_full.losses[8 + i]).epsilon(1e-5));
    CHECK(moved.losses[i] == Approx(full.losses[8 + i]).epsilon(1e-5));
  }
  if (rank == 0) {
    // the moments the ZeRO-1 run wrote are the plain run's (every value written once)
    const auto& store = zero_run.model().params();
    const auto z = checkpoint_moments(zero_ckpt, store), p = checkpoint_moments(plain_ckpt, store);
    REQUIRE(z.size() == p.size());
    std::printf("zero-1 checkpoint on %d ranks: moments max |diff| %.2e (max |value| %.2e)\n", n, max_abs_diff(z, p),
                max_abs(p));
    CHECK(max_abs_diff(z, p) <= 1e-4 * max_abs(p));
    CHECK(max_abs(p) > 0);
    // and without ZeRO on one rank
    const TrainResult serial = Training(deck("serial", 0, {}), MPI_COMM_SELF, quiet(true, zero_ckpt)).run();
    REQUIRE(serial.losses.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(serial.losses[i] == Approx(full.losses[8 + i]).epsilon(1e-5));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
