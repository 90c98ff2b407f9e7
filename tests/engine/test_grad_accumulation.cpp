// Gradient accumulation without a pipeline: parallel.micro_batches = m with
// parallel.pipeline = 1 runs the local batch as m micro-batches whose gradients add up
// before one all-reduce. The same deck with and without it, alone and with data and tensor
// parallelism, on 1, 2 and 4 ranks, gives the serial whole-batch run's losses and
// parameters within the pipeline tests' tolerances (float sums in another order), keeping
// one micro-batch's activations; the residual network's accuracies too.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

Deck gpt_deck(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"run.steps=10", "run.val_every=5", "run.val_batches=1", "run.seed=21",
                                  "parallel.grad_bucket_mb=0.002"};  // buckets start during the last backward
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

std::vector<std::vector<std::string>> gpt_layouts_for(int n) {
  switch (n) {
    case 1:
      return {{"parallel.micro_batches=2"}, {"parallel.micro_batches=8"}};
    case 2:
      return {{"parallel.data=2", "parallel.micro_batches=2"},
              {"parallel.data=2", "parallel.micro_batches=4"},
              {"parallel.tensor_cols=2", "parallel.micro_batches=4"}};
    case 4:
      return {
          {"parallel.data=4", "parallel.micro_batches=2"},
          {"parallel.data=2", "parallel.tensor_cols=2", "parallel.micro_batches=2"},
          {"parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2", "parallel.micro_batches=2"}};
    default:
      return {};
  }
}

}  // namespace

TEST_CASE("gradient accumulation equals the whole-batch run, alone and with data and tensor parallelism",
          "[mpi][accumulation]") {
  const int n = world_size(), rank = world_rank();
  const auto [ser, ser_params] = serial_run<Training>(gpt_deck({}));
  for (const auto& layout : gpt_layouts_for(n)) {
    Training par(gpt_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = global_params_of(par);
    if (rank == 0) {
      INFO(describe(layout) << " on " << n << " ranks");
      REQUIRE(r.losses.size() == ser.losses.size());
      const double worst = max_rel_diff(r.losses, ser.losses);
      std::vector<double> val, ser_val;
      for (const auto& v : r.val) val.push_back(v.second);
      for (const auto& v : ser.val) ser_val.push_back(v.second);
      REQUIRE(val.size() == ser_val.size());
      std::printf("accumulation, %s on %d ranks: worst loss rel diff %.2e, val %.2e, param max diff %.2e\n",
                  describe(layout).c_str(), n, worst, max_rel_diff(val, ser_val), max_abs_diff(params, ser_params));
      CHECK(worst < 3e-7);  // the pipeline tests' tolerances
      CHECK(max_rel_diff(val, ser_val) < 3e-7);
      CHECK(max_abs_diff(params, ser_params) < 5e-5);
      // one micro-batch's activations are kept: 1 / (data x m) of the serial run's
      const Deck d = gpt_deck(layout);
      if (d.parallel.tensor_cols == 1)
        CHECK(r.activation_bytes * d.parallel.data * d.parallel.micro_batches == ser.activation_bytes);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("the residual network with gradient accumulation equals its whole-batch run", "[mpi][accumulation]") {
  const int n = world_size(), rank = world_rank();
  if (n > 2) return;
  const auto [ser, ser_params] = serial_run<Training>(small_resnet_deck({}));
  const std::vector<std::string> layout = {"parallel.data=" + std::to_string(n), "parallel.micro_batches=3"};
  Training par(small_resnet_deck(layout), MPI_COMM_WORLD, quiet());
  const TrainResult r = par.run();
  const auto params = global_params_of(par);
  if (rank == 0) {
    INFO(describe(layout) << " on " << n << " ranks");
    REQUIRE(r.losses.size() == ser.losses.size());
    const double worst = max_rel_diff(r.losses, ser.losses);
    std::printf("resnet accumulation, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                describe(layout).c_str(), n, worst, max_abs_diff(params, ser_params));
    CHECK(worst < 3e-7);
    CHECK(max_abs_diff(params, ser_params) < 5e-5);
    REQUIRE(r.accuracy.size() == ser.accuracy.size());
    for (size_t s = 0; s < r.accuracy.size(); ++s) CHECK(r.accuracy[s].second == ser.accuracy[s].second);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
