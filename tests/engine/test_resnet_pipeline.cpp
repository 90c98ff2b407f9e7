// The residual network under the GPT's engines (it is a StageModel): GPipe, 1F1B, ZB-H1, ZB-H2
// pipelines, alone and with data parallelism, and data parallelism alone, give the serial
// run's losses, test accuracies and final parameters within the tolerances of the GPT's
// pipeline test; the dense and the convolutional network.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

std::vector<std::vector<std::string>> resnet_layouts_for(int n) {
  const std::string p2 = "parallel.pipeline=2", m3 = "parallel.micro_batches=3";
  switch (n) {
    case 2:
      return {{p2, m3, "parallel.schedule=gpipe"},
              {p2, m3, "parallel.schedule=1f1b"},
              {p2, m3, "parallel.schedule=zb-h1"},
              {"parallel.data=2"}};
    case 4:
      return {{"parallel.pipeline=4", "parallel.micro_batches=2", "parallel.schedule=1f1b"},
              {"parallel.pipeline=4", "parallel.micro_batches=4", "parallel.schedule=zb-h2"},
              {"parallel.data=2", "parallel.pipeline=2", "parallel.micro_batches=2", "parallel.schedule=gpipe"},
              {"parallel.data=2", p2, m3, "parallel.schedule=1f1b", "model.channels=2"},
              {"parallel.data=2", p2, m3, "parallel.schedule=zb-h1", "model.channels=2"}};
    default:
      return {};
  }
}

}  // namespace

TEST_CASE("the residual network's pipeline and data-parallel runs equal its serial run", "[mpi][resnet_pipeline]") {
  const int n = world_size(), rank = world_rank();
  const auto layouts = resnet_layouts_for(n);
  if (layouts.empty()) return;
  for (const bool conv : {false, true}) {
    const std::string channels = "model.channels=2";
    std::vector<std::vector<std::string>> mine;  // this network's layouts
    for (const auto& l : layouts)
      if ((std::find(l.begin(), l.end(), channels) != l.end()) == conv) mine.push_back(l);
    if (mine.empty()) continue;
    const std::vector<std::string> kind = conv ? std::vector<std::string>{channels} : std::vector<std::string>{};
    TrainResult ser;
    std::vector<double> ser_params;
    if (rank == 0) {
      Training serial(small_resnet_deck(kind), MPI_COMM_SELF, quiet());
      ser = serial.run();
      ser_params = global_params_of(serial);
    }
    for (const auto& layout : mine) {
      Training par(small_resnet_deck(layout), MPI_COMM_WORLD, quiet());
      const TrainResult r = par.run();
      const auto params = global_params_of(par);
      if (rank == 0) {
        INFO(describe(layout) << " on " << n << " ranks");
        const double worst = compare_runs(r, ser);
        std::printf("resnet equivalence (%s), %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                    conv ? "convolutional" : "dense", describe(layout).c_str(), n, worst,
                    max_abs_diff(params, ser_params));
        // the GPT pipeline test's tolerances: float sums in another order
        CHECK(worst < 3e-7);
        CHECK(max_abs_diff(params, ser_params) < 5e-5);
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
