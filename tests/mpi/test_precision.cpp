// model.precision = "bf16": the GPT trained with bf16 products (fp32 accumulation and
// masters) follows the fp32 run closely, and every parallel layout of it equals its own
// serial bf16 run; a bf16 checkpoint restarts in fp32. Skipped (with a message) on a CPU
// without bf16 products.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/matmul_bf16.hpp"
#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"
#include "train/trainer.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// The small fortunes GPT, 12 steps with a validation at 6 and 12.
Deck precision_deck(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"run.steps=12", "run.val_every=6", "run.val_batches=1", "run.seed=3",
                                  "model.n_embd=64", "model.n_head=4", "data.batch_size=8"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

std::vector<std::vector<std::string>> bf16_layouts_for(int n) {
  const std::string bf16 = "model.precision=bf16";
  switch (n) {
    case 2: return {{bf16, "parallel.data=2"},
                    {bf16, "parallel.pipeline=2", "parallel.micro_batches=2", "parallel.schedule=1f1b"},
                    {bf16, "parallel.tensor_cols=2"}};
    case 4: return {{bf16, "parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2"},
                    {bf16, "parallel.data=2", "parallel.pipeline=2", "parallel.micro_batches=2"}};
    default: return {};
  }
}

struct Run {
  TrainResult result;
  std::vector<double> params;
};

Run serial_run(const Deck& d) {
  Trainer t(d, MPI_COMM_SELF, quiet());
  Run r;
  r.result = t.run();
  const auto f = to_host<float>(t.model().params().params());
  r.params.assign(f.begin(), f.end());
  return r;
}

}  // namespace

TEST_CASE("bf16 products: close to fp32, and every layout equals its serial bf16 run", "[mpi][bf16]") {
  const int n = world_size(), rank = world_rank();
  if (const std::string why = kernels::bf16_products_unavailable(); !why.empty()) {
    WARN("bf16 products not tested: " + why);
    return;
  }
  Run fp32, bf16;
  if (rank == 0) {
    fp32 = serial_run(precision_deck({}));
    bf16 = serial_run(precision_deck({"model.precision=bf16"}));
    REQUIRE(bf16.result.losses.size() == fp32.result.losses.size());
    double worst = 0;
    for (size_t s = 0; s < fp32.result.losses.size(); ++s)
      worst = std::max(worst, std::abs(bf16.result.losses[s] - fp32.result.losses[s]) / fp32.result.losses[s]);
    std::printf("bf16 against fp32, serial: worst loss rel diff %.2e, param max diff %.2e\n", worst,
                max_abs_diff(bf16.params, fp32.params));
    CHECK(worst < 1e-2);                                 // the same training, to bf16's precision
    CHECK(bf16.result.losses != fp32.result.losses);     // and the products did run in bf16
  }
  for (const auto& layout : bf16_layouts_for(n)) {
    Trainer par(precision_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = gather_global(par.model().params(), par.model().params().params(), par.grid().model().raw());
    if (rank == 0) {
      INFO(describe(layout) << " on " << n << " ranks");
      REQUIRE(r.losses.size() == bf16.result.losses.size());
      double worst = 0;
      for (size_t s = 0; s < r.losses.size(); ++s)
        worst = std::max(worst, std::abs(r.losses[s] - bf16.result.losses[s]) / bf16.result.losses[s]);
      std::printf("bf16 equivalence, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                  describe(layout).c_str(), n, worst, max_abs_diff(params, bf16.params));
      // fp32 sums in another order (the tensor split's partial products, micro-batches)
      // can move an activation across a bf16 rounding boundary, and AdamW magnifies what
      // that does to gradients near zero. Seen: losses <= 2.3e-5 relative and parameters
      // <= 2.3e-3 (1D t=2) from the serial bf16 run, where bf16 and fp32 differ by 7.8e-5
      // and 6.0e-3: the layouts are the serial bf16 run's, not the fp32 one's
      CHECK(worst < 5e-5);
      CHECK(max_abs_diff(params, bf16.params) < 4e-3);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a bf16 checkpoint restarts in fp32", "[mpi][bf16]") {
  if (world_size() != 2 || !kernels::bf16_products_unavailable().empty()) return;
  const std::string dir = "precision_test_runs";
  if (world_rank() == 0) std::filesystem::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> common = {"run.out_dir=" + dir, "run.name=mixed", "parallel.data=2",
                                           "run.checkpoint_every=6"};
  auto bf16 = common;
  bf16.push_back("model.precision=bf16");
  Trainer(precision_deck(bf16), MPI_COMM_WORLD, quiet(true)).run();
  auto fp32 = common;
  fp32.push_back("run.steps=16");
  const TrainResult resumed = Trainer(precision_deck(fp32), MPI_COMM_WORLD, quiet(true, "latest")).run();
  CHECK(resumed.first_step == 12);
  CHECK(resumed.losses.size() == 4);
  for (double l : resumed.losses) CHECK(std::isfinite(l));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}
