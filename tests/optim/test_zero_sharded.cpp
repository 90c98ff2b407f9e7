// ZeRO-2 and ZeRO-3 (parallel.zero = 2, 3; ZeRO-3 in bf16 too). ZeRO-2: the gradients split over the data
// ranks too, each unit (a block, the embedding, the final norm, the experts' region)
// reduce-scattered as the backward makes it final, every micro-batch. ZeRO-3: the
// parameters too, each unit gathered for the step of a pass that reads it. Against the
// same layout without ZeRO (1e-6 relative, the bound: float sums in another order;
// each of those layouts has its own test against the serial run), on 2 and 4 ranks: alone,
// with accumulation, full and selective recomputation, prefetch depths 0 and 2, gathered
// parameters kept through the step, a 1D split with sequence parallelism and a 3D tensor
// split, context parallelism, 1F1B, interleaved, ZB-H1 and ZB-H2 pipelines, mixtures of experts with
// expert parallelism, and on 8 ranks the 2D split; each rank holds its part of the
// gradients, moments (and ZeRO-3 parameters) and the slots of the units in the works (what
// the planner's simulations of the backward and of the gathers say). Checkpoints: a ZeRO-3 checkpoint restarts on
// its layout bit for bit and on one rank without ZeRO; on 2 ranks under ZeRO-2, a ZeRO-2
// one without ZeRO, and a ZeRO-2, a ZeRO-1 and a plain one under ZeRO-3 (ZeRO-2 writes and
// reads its moments as ZeRO-3 does, and its parameters as ZeRO-1 does); on 4 ranks on data
// 2 x pipeline 2 with ZeRO-3.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "optim/unit_gradient_sum.hpp"
#include "optim/zero3_gathers.hpp"
#include "plan/engine_traffic.hpp"
#include "support/bf16_gate.hpp"
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
              {"parallel.data=2", "parallel.micro_batches=2", "parallel.zero_prefetch=0"},
              {"parallel.data=2", "parallel.recompute=full"},
              {"parallel.data=2", "parallel.recompute=selective", "parallel.zero_prefetch=2"},
              {"parallel.data=2", "parallel.micro_batches=4", "parallel.zero_keep_params=true"}};
    case 4: {
      std::vector<std::vector<std::string>> out = {
          {"parallel.data=4"},
          {"parallel.data=2", "parallel.tensor_cols=2", "parallel.sequence_parallel=true"},
          {"parallel.data=2", "parallel.tensor_cols=2"},  // (ZeRO-3's finer units under a 1D split)
          {"parallel.data=2", "parallel.tensor_mode=3d", "parallel.tensor_depth=2"},
          {"parallel.data=2", "parallel.context=2"},
          {"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=1f1b", "parallel.micro_batches=2"},
          {"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2",
           "parallel.micro_batches=2", "model.n_layer=4"},
          {"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=zb-h1", "parallel.micro_batches=4"},
          {"parallel.data=2", "parallel.pipeline=2", "parallel.schedule=zb-h2", "parallel.micro_batches=4"}};
      experts.push_back("parallel.data=4");
      out.push_back(experts);  // the experts' region over 2 expert replicas
      experts.back() = "parallel.data=4";
      experts[5] = "parallel.expert=4";
      out.push_back(experts);  // over 1: written into the rank's part directly
      return out;
    }
    case 8:  // the 2D split's 2 x 2 grid under 2 replicas (the mpi_np8_tensor_pipeline test)
      return {{"parallel.data=2", "parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2"}};
    default:
      return {};
  }
}

// The layout at ZeRO stage `stage`: its ZeRO-3 keys (zero_prefetch, zero_keep_params) only
// at stage 3, since a deck is refused for them at another stage.
std::vector<std::string> at_stage(const std::vector<std::string>& layout, int stage) {
  std::vector<std::string> out;
  for (const auto& o : layout)
    if (stage == 3 || o.rfind("parallel.zero_", 0) != 0) out.push_back(o);
  out.push_back("parallel.zero=" + std::to_string(stage));
  return out;
}

}  // namespace

TEST_CASE("ZeRO-2 and ZeRO-3 equal the run without ZeRO", "[mpi][zero][zero_2d]") {
  const int n = world_size(), rank = world_rank();
  for (const auto& layout : zero2_layouts_for(n)) {
    Training plain(zero2_deck(at_stage(layout, 0)), MPI_COMM_WORLD, quiet());
    const TrainResult p = plain.run();
    const auto plain_params = global_params_of(plain);
    for (const int stage : {2, 3}) {
      const Deck d = zero2_deck(at_stage(layout, stage));
      Training par(d, MPI_COMM_WORLD, quiet());
      const TrainResult r = par.run();
      const auto params = global_params_of(par);
      // this rank's part of every unit's gradients and moments, and the units in the works
      auto& store = par.model().params();
      REQUIRE(store.zero().gradients_sharded());
      REQUIRE(store.zero().params_sharded() == (stage == 3));
      int64_t owned = 0;
      for (const auto& u : store.zero().gradient_slots()->units()) owned += u.part();
      CHECK(int64_t(store.zero().adam_m().extent(0)) == owned);
      const auto units = zero2_units(par.model(), int(d.parallel.data * d.parallel.context));  // the same units
      const int m = int(d.parallel.micro_batches);
      const auto backwards =  // by halves under the zero-bubble schedules
          splits_backward(d.parallel.schedule) && d.parallel.pipeline > 1
              ? stage_backwards(make_schedule(d.parallel.schedule, int(d.parallel.pipeline), m)
                                    .programs[size_t(par.model().placement().stage)])
              : whole_backwards(m);
      CHECK(store.zero().gradient_slots()->slot_values() == zero2_slot_values(par.model(), units, backwards));
      CHECK(store.grad_bytes() == (owned + store.zero().gradient_slots()->slot_values()) * int64_t(sizeof(float)));
      if (stage == 3) {
        CHECK(int64_t(store.param_values().extent(0)) == owned);
        CHECK(store.param_bytes() == (owned + store.zero().param_gather()->slot_values()) * int64_t(sizeof(float)));
        if (d.parallel.pipeline == 1)  // the most gathered values at once: the planner's simulation of the passes
          CHECK(store.zero().param_gather()->slot_values() ==
                zero3_gathers(par.model(), units, data_parallel_passes(int(d.parallel.micro_batches)),
                              gather_policy(d.parallel))
                    .slot_values);
      }
      if (rank == 0) {
        INFO(describe(layout) << " with zero = " << stage << " on " << n << " ranks");
        REQUIRE(r.losses.size() == p.losses.size());
        const double to_plain = max_rel_diff(r.losses, p.losses);
        std::printf(
            "zero-%d, %s on %d ranks: worst loss rel diff %.2e to zero 0 (params %.2e); parameters %.2f and "
            "gradients %.2f of zero 0's bytes\n",
            stage, describe(layout).c_str(), n, to_plain, max_abs_diff(params, plain_params),
            double(store.param_bytes()) / double(plain.model().params().param_bytes()),
            double(store.grad_bytes()) / double(plain.model().params().grad_bytes()));
        CHECK(to_plain < 1e-6);
        CHECK(max_abs_diff(params, plain_params) < 5e-5);
        for (size_t s = 0; s < r.val.size(); ++s) CHECK(r.val[s].second == Approx(p.val[s].second).epsilon(1e-6));
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE(
    "a ZeRO-3 checkpoint restarts on its layout, without ZeRO on one rank and under ZeRO-2; a ZeRO-2 one without "
    "ZeRO; a ZeRO-2, a ZeRO-1 and a plain one under ZeRO-3",
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
  const auto ckpt = [&](const std::string& run) { return base + "/" + run + "/checkpoints/ckpt_00000004.h5"; };
  const auto resume = [&](const std::string& name, std::vector<std::string> layout, const std::string& from) {
    return Training(deck(name, 0, std::move(layout)), MPI_COMM_WORLD, quiet(true, ckpt(from))).run();
  };
  const TrainResult full3 = Training(deck("zero3", 4, {data, "parallel.zero=3"}), MPI_COMM_WORLD, quiet(true)).run();
  const TrainResult resumed3 = resume("resumed3", {data, "parallel.zero=3"}, "zero3");
  REQUIRE(resumed3.losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(resumed3.losses[i] == full3.losses[4 + i]);
  if (n == 2) {  // across the stages (on 4 ranks, to keep the suite's time, onto a pipeline instead)
    const TrainResult full2 = Training(deck("zero2", 4, {data, "parallel.zero=2"}), MPI_COMM_WORLD, quiet(true)).run();
    const TrainResult full1 = Training(deck("zero1", 4, {data, "parallel.zero=1"}), MPI_COMM_WORLD, quiet(true)).run();
    const TrainResult plain_full = Training(deck("plain", 4, {data}), MPI_COMM_WORLD, quiet(true)).run();
    const TrainResult three_as_two = resume("three-as-two", {data, "parallel.zero=2"}, "zero3");
    const TrainResult two_as_three = resume("two-as-three", {data, "parallel.zero=3"}, "zero2");
    const TrainResult two_as_plain = resume("two-as-plain", {data}, "zero2");
    const TrainResult one_as_three = resume("one-as-three", {data, "parallel.zero=3"}, "zero1");
    const TrainResult plain_as_three = resume("plain-as-three", {data, "parallel.zero=3"}, "plain");
    for (const auto* r : {&three_as_two, &two_as_three, &two_as_plain, &one_as_three, &plain_as_three})
      REQUIRE(r->losses.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      CHECK(three_as_two.losses[i] == Approx(full3.losses[4 + i]).epsilon(1e-6));
      CHECK(two_as_three.losses[i] == Approx(full2.losses[4 + i]).epsilon(1e-6));
      CHECK(two_as_plain.losses[i] == Approx(full2.losses[4 + i]).epsilon(1e-6));
      CHECK(one_as_three.losses[i] == Approx(full1.losses[4 + i]).epsilon(1e-6));
      CHECK(plain_as_three.losses[i] == Approx(plain_full.losses[4 + i]).epsilon(1e-6));
    }
  } else {  // onto data 2 x pipeline 2 with ZeRO-3 (other units: a stage's)
    const TrainResult piped = resume(
        "piped", {"parallel.data=2", "parallel.pipeline=2", "parallel.micro_batches=2", "parallel.zero=3"}, "zero3");
    REQUIRE(piped.losses.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(piped.losses[i] == Approx(full3.losses[4 + i]).epsilon(1e-6));
  }
  if (rank == 0) {
    const TrainResult serial = Training(deck("serial", 0, {}), MPI_COMM_SELF, quiet(true, ckpt("zero3"))).run();
    REQUIRE(serial.losses.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(serial.losses[i] == Approx(full3.losses[4 + i]).epsilon(1e-6));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("ZeRO-3 in bf16 equals the bf16 run without ZeRO", "[mpi][zero][bf16]") {
  const int n = world_size(), rank = world_rank();
  REQUIRE_BF16_PRODUCTS();
  if (n == 1) return;
  // (the run without ZeRO reads the parameters' bf16 copy, ZeRO-3's products round the
  // gathered parameters per call: oneDNN's rounding both ways; 2 ranks: equal losses,
  // parameters within 1.1e-8)
  const std::vector<std::string> layout = {"model.precision=bf16", "parallel.data=" + std::to_string(n)};
  Training plain(zero2_deck(layout), MPI_COMM_WORLD, quiet());
  const TrainResult p = plain.run();
  Training par(zero2_deck(at_stage(layout, 3)), MPI_COMM_WORLD, quiet());
  const TrainResult r = par.run();
  const auto params = global_params_of(par), plain_params = global_params_of(plain);
  if (rank == 0) {
    REQUIRE(r.losses.size() == p.losses.size());
    size_t moved = 0;  // parameters more than a tenth of lr (3e-3) apart
    for (size_t i = 0; i < params.size(); ++i) moved += std::abs(params[i] - plain_params[i]) > 3e-4 ? 1 : 0;
    std::printf(
        "zero-3 in bf16 on %d ranks: worst loss rel diff %.2e to zero 0 (params %.2e; %zu of %zu apart by > 3e-4)\n", n,
        max_rel_diff(r.losses, p.losses), max_abs_diff(params, plain_params), moved, params.size());
    // the first step's loss, on the same weights, within what the sums' order moves; later
    // ones as every bf16 layout's (model/test_precision.cpp): a gradient summed in another
    // order moves a weight by 1e-7, and one that crosses a bf16 rounding boundary moves
    // its operand by 2^-8. ZeRO-3's finer units sum the head's input gradient over the
    // vocabulary in chunks (another order of fp32 sums): a weight whose gradient is at
    // that noise can then step the other way. The bound is one such step: AdamW moves a
    // weight by lr |m^| / sqrt(v^) a step, and with Adam's averages m^ = sum w_i g_i and
    // v^ = sum u_i g_i^2 (bias-corrected weights, each summing to 1), Cauchy-Schwarz gives
    // |m^| <= sqrt(max_i w_i / u_i) sqrt(v^): at most 1.087 lr in the first 8 steps with
    // beta = (0.9, 0.95); two runs stepping opposite ways part by 2 x 1.087 lr. And few
    // weights may: at most 1 in 200 more than a tenth of a step apart. (2 and 4 ranks:
    // 5.3e-6 and 5.9e-6 in the losses, 3.46e-3 = 1.15 lr at most in the parameters, 49
    // of 34176 apart by more than a tenth of a step.)
    constexpr double lr = 3e-3, adam_step = 1.087 * lr;
    CHECK(std::abs(r.losses[0] - p.losses[0]) / p.losses[0] < 5e-6);
    CHECK(max_rel_diff(r.losses, p.losses) < 1e-4);
    CHECK(max_abs_diff(params, plain_params) <= 2 * adam_step);
    CHECK(moved < params.size() / 200);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
