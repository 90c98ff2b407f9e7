// ZeRO-2 (parallel.zero = 2): the gradients split over the data ranks too, each unit (a
// block, the embedding, the final norm, the experts' region) reduce-scattered as the
// backward makes it final, every micro-batch. Against the same layout without ZeRO (1e-6
// relative, the bound: float sums in another order; each of those layouts has its
// own test against the serial run), on 2 and 4 ranks: alone, with accumulation, full recomputation, a 1D and a
// 3D tensor split, context parallelism, 1F1B and interleaved pipelines, mixtures of
// experts with expert parallelism; each rank holds its part of the gradients and moments
// and the slots of the units in the works (what the planner's simulation of the backward
// says). Checkpoints: a ZeRO-2 checkpoint restarts on its layout bit for bit, on one rank
// without ZeRO, under ZeRO-1 and (4 ranks) on data 2 x pipeline 2 with ZeRO-2; a plain
// one under ZeRO-2.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "optim/unit_gradient_sum.hpp"
#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

Deck zero2_deck(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"run.steps=8", "run.val_every=4", "run.val_batches=1", "run.seed=29"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

const std::vector<std::string> kExperts = {"model.n_layer=4",         "model.moe_experts=4",     "model.moe_every=2",
                                           "model.moe_ffn_hidden=48", "optim.moe_aux_loss=0.02", "parallel.expert=2"};

std::vector<std::vector<std::string>> zero2_layouts_for(int n) {
  std::vector<std::string> experts = kExperts;
  switch (n) {
    case 2:
      return {{"parallel.data=2"},
              {"parallel.data=2", "parallel.micro_batches=2"},
              {"parallel.data=2", "parallel.recompute=full"}};
    case 4: {
      std::vector<std::vector<std::string>> out = {
          {"parallel.data=4"},
          {"parallel.data=2", "parallel.tensor_cols=2"},
          {"parallel.data=2", "parallel.tensor_mode=3d", "parallel.tensor_depth=2"},
          {"parallel.data=2", "parallel.context=2"},
          {"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=1f1b", "parallel.micro_batches=2"},
          {"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
           "parallel.micro_batches=2", "model.n_layer=4"}};
      experts.push_back("parallel.data=4");
      out.push_back(experts);  // the experts' region over 2 expert replicas
      experts.back() = "parallel.data=4";
      experts[5] = "parallel.expert=4";
      out.push_back(experts);  // over 1: written into the rank's part directly
      return out;
    }
    default:
      return {};
  }
}

std::vector<std::string> with(std::vector<std::string> layout, const std::string& key) {
  layout.push_back(key);
  return layout;
}

}  // namespace

TEST_CASE("ZeRO-2 equals the run without ZeRO", "[mpi][zero]") {
  const int n = world_size(), rank = world_rank();
  for (const auto& layout : zero2_layouts_for(n)) {
    Training plain(zero2_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult p = plain.run();
    const auto plain_params = global_params_of(plain);
    const Deck d = zero2_deck(with(layout, "parallel.zero=2"));
    Training par(d, MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = global_params_of(par);
    // this rank's part of every unit's gradients and moments, and the units in the works
    auto& store = par.model().params();
    REQUIRE(store.gradients_sharded());
    int64_t owned = 0;
    for (const auto& u : store.gradient_slots()->units()) owned += u.part();
    CHECK(int64_t(store.adam_m().extent(0)) == owned);
    const auto units = zero2_units(par.model(), int(d.parallel.data * d.parallel.context));  // the same units
    CHECK(store.gradient_slots()->slot_values() ==
          zero2_slot_values(par.model(), units, int(d.parallel.micro_batches)));
    CHECK(store.grad_bytes() == (owned + store.gradient_slots()->slot_values()) * int64_t(sizeof(float)));
    if (rank == 0) {
      INFO(describe(layout) << " with zero = 2 on " << n << " ranks");
      REQUIRE(r.losses.size() == p.losses.size());
      const double to_plain = max_rel_diff(r.losses, p.losses);
      std::printf(
          "zero-2, %s on %d ranks: worst loss rel diff %.2e to zero 0 (params %.2e); gradients %.2f of zero 0's "
          "bytes, %d slots\n",
          describe(layout).c_str(), n, to_plain, max_abs_diff(params, plain_params),
          double(store.grad_bytes()) / double(plain.model().params().grad_bytes()),
          store.gradient_slots()->slots_allocated());
      CHECK(to_plain < 1e-6);
      CHECK(max_abs_diff(params, plain_params) < 5e-5);
      for (size_t s = 0; s < r.val.size(); ++s) CHECK(r.val[s].second == Approx(p.val[s].second).epsilon(1e-6));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE(
    "a ZeRO-2 checkpoint restarts on its layout, without ZeRO on one rank and under ZeRO-1; a plain one under "
    "ZeRO-2",
    "[mpi][zero][checkpoint]") {
  const int n = world_size(), rank = world_rank();
  if (n == 1) return;
  const std::string base = "zero2_test_runs/np" + std::to_string(n);  // ctest runs np2/np4 side by side
  if (rank == 0) std::filesystem::remove_all(base);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto deck = [&](const std::string& name, int64_t every, std::vector<std::string> layout) {
    std::vector<std::string> all = {"run.out_dir=" + base,
                                    "run.name=" + name,
                                    "run.steps=8",
                                    "run.val_every=0",
                                    "run.checkpoint_every=" + std::to_string(every),
                                    "run.keep_checkpoints=3"};
    all.insert(all.end(), layout.begin(), layout.end());
    return zero2_deck(all);
  };
  const std::string data = "parallel.data=" + std::to_string(n);
  const std::string zero2_ckpt = base + "/zero2/checkpoints/ckpt_00000004.h5";
  const std::string plain_ckpt = base + "/plain/checkpoints/ckpt_00000004.h5";
  const TrainResult full = Training(deck("zero2", 4, {data, "parallel.zero=2"}), MPI_COMM_WORLD, quiet(true)).run();
  const TrainResult plain_full = Training(deck("plain", 4, {data}), MPI_COMM_WORLD, quiet(true)).run();
  const TrainResult resumed =
      Training(deck("resumed", 0, {data, "parallel.zero=2"}), MPI_COMM_WORLD, quiet(true, zero2_ckpt)).run();
  const TrainResult as_zero1 =
      Training(deck("as-zero1", 0, {data, "parallel.zero=1"}), MPI_COMM_WORLD, quiet(true, zero2_ckpt)).run();
  const TrainResult from_plain =
      Training(deck("from-plain", 0, {data, "parallel.zero=2"}), MPI_COMM_WORLD, quiet(true, plain_ckpt)).run();
  // on 4 ranks also onto data 2 x pipeline 2 with ZeRO-2 (other units: a stage's)
  TrainResult piped = full;
  if (n == 4)
    piped = Training(deck("piped", 0,
                          {"parallel.data=2", "parallel.pipeline=2", "parallel.micro_batches=2", "parallel.zero=2"}),
                     MPI_COMM_WORLD, quiet(true, zero2_ckpt))
                .run();
  REQUIRE(resumed.losses.size() == 4);
  REQUIRE(as_zero1.losses.size() == 4);
  REQUIRE(piped.losses.size() == (n == 4 ? 4u : 8u));
  REQUIRE(from_plain.losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(resumed.losses[i] == full.losses[4 + i]);
    CHECK(as_zero1.losses[i] == Approx(full.losses[4 + i]).epsilon(1e-6));
    if (n == 4) CHECK(piped.losses[i] == Approx(full.losses[4 + i]).epsilon(1e-6));
    CHECK(from_plain.losses[i] == Approx(plain_full.losses[4 + i]).epsilon(1e-6));
  }
  if (rank == 0) {
    const TrainResult serial = Training(deck("serial", 0, {}), MPI_COMM_SELF, quiet(true, zero2_ckpt)).run();
    REQUIRE(serial.losses.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(serial.losses[i] == Approx(full.losses[4 + i]).epsilon(1e-6));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
