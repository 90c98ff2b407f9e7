// parallel.dispatch = "ready" gives the "order" run's bits: every step's loss and the final
// parameters equal exactly, with slowdowns injected on the stages ([variability]) so that
// stages run passes out of the schedule's order, on the flushing schedules alone and with
// data parallelism and ZeRO-2 or ZeRO-3 with full recomputation (the whole stage agrees
// on each pick), a 1D and a 2D tensor split, context parallelism and experts over the
// data group (their groups agree), and more micro-batches in flight than the schedule's
// peak.
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

Deck ready_deck(const std::vector<std::string>& layout, const std::vector<std::string>& dispatch) {
  std::vector<std::string> all = {"run.out_dir=ready_test_runs", "run.seed=5", "model.n_layer=5",
                                  "data.batch_size=12", "run.steps=3", "run.val_every=0"};
  all.insert(all.end(), layout.begin(), layout.end());
  all.insert(all.end(), dispatch.begin(), dispatch.end());
  return small_gpt_deck(all);
}

std::vector<std::vector<std::string>> ready_layouts_for(int n) {
  const std::string p2 = "parallel.pipeline=2", m4 = "parallel.micro_batches=4";
  switch (n) {
    case 2:
      return {{p2, m4, "parallel.schedule=gpipe"},
              {p2, m4, "parallel.schedule=1f1b"},
              {p2, m4, "parallel.schedule=zb-h1"},
              {p2, m4, "parallel.schedule=zb-h2"},
              {p2, m4, "parallel.schedule=interleaved", "parallel.virtual_stages=2"}};
    case 4:
      return {{"parallel.pipeline=4", "parallel.micro_batches=6", "parallel.schedule=1f1b"},
              {"parallel.pipeline=4", "parallel.micro_batches=6", "parallel.schedule=zb-h1"},
              {"parallel.pipeline=4", "parallel.micro_batches=6", "parallel.schedule=gpipe"},
              {p2, m4, "parallel.schedule=zb-h1", "parallel.tensor_cols=2"},
              {"parallel.data=2", p2, "parallel.micro_batches=6", "parallel.schedule=zb-h2", "parallel.zero=2",
               "data.batch_size=24"},
              {p2, m4, "parallel.schedule=zb-h1", "parallel.context=2"},
              {"parallel.data=2", p2, "parallel.micro_batches=3", "parallel.schedule=1f1b", "parallel.zero=3",
               "parallel.recompute=full"},
              {"parallel.data=2", p2, "parallel.micro_batches=3", "parallel.schedule=gpipe", "model.moe_experts=4",
               "parallel.expert=2"}};
    case 8:
      return {{p2, "parallel.micro_batches=3", "parallel.schedule=zb-h1", "parallel.tensor_mode=2d", "parallel.tensor_rows=2",
               "parallel.tensor_cols=2"}};
    default:
      return {};
  }
}

}  // namespace

TEST_CASE("ready dispatch under injected slowdowns gives the order run's bits", "[mpi][pipeline][ready]") {
  const int n = world_size(), rank = world_rank();
  const auto layouts = ready_layouts_for(n);
  if (layouts.empty()) return;
  for (size_t k = 0; k < layouts.size(); ++k) {
    const auto& layout = layouts[k];
    // every other layout with room for more micro-batches in flight than its schedule's peak
    const std::string room = k % 2 == 0 ? "parallel.dispatch_in_flight=" + std::to_string(n + 2) : "";
    Training order(ready_deck(layout, {}), MPI_COMM_WORLD, quiet());
    const TrainResult a = order.run();
    const auto order_params = test::global_params_of(order);
    // every stage slowed by up to 3x its pass time on a fifth of its passes: late messages
    std::vector<std::string> dispatch = {"parallel.dispatch=ready", "variability.draw=spikes",
                                         "variability.slowdown_max=3", "variability.spike_chance=0.2"};
    if (!room.empty()) dispatch.push_back(room);
    Training ready(ready_deck(layout, dispatch), MPI_COMM_WORLD, quiet());
    const TrainResult b = ready.run();
    const auto ready_params = test::global_params_of(ready);
    int64_t all_reordered = 0;
    MPI_Reduce(&b.reordered_passes, &all_reordered, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      INFO(describe(layout) << " " << room << " on " << n << " ranks");
      std::printf("ready dispatch, %s %s on %d ranks: %lld passes run before the schedule's next\n",
                  describe(layout).c_str(), room.c_str(), n, static_cast<long long>(all_reordered));
      CHECK(b.losses == a.losses);
      CHECK(ready_params == order_params);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
