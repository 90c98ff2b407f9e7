// Pipeline equivalence: GPipe, 1F1B, ZB-H1 and ZB-H2, alone and with data or tensor
// parallelism, give the serial run's losses and final parameters (the zero-bubble ones
// GPipe's gradients bit for bit); uneven layer partitions, an odd number of micro-batches
// and the tied embedding on the first and last stage included, and layers placed by
// parallel.last_stage_layers; interleaved 1F1B with 2
// chunks per stage too. A 1F1B checkpoint written by 2 stages restarts on 4 stages under
// ZB-H2, on 2 stages interleaved and on 1.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "engine/pipeline/pipeline_engine.hpp"
#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

// n_layer = 5: 2 stages hold 2 and 3 layers, 4 stages 1, 1, 1 and 2.
Deck pipe_deck(const std::vector<std::string>& overrides, const std::string& name = "pipe", int64_t steps = 10,
               int64_t every = 0) {
  std::vector<std::string> all = {"run.out_dir=pipeline_test_runs",
                                  "run.val_every=5",
                                  "run.val_batches=1",
                                  "run.seed=21",
                                  "model.n_layer=5",
                                  "data.batch_size=12",
                                  "run.name=" + name,
                                  "run.steps=" + std::to_string(steps),
                                  "run.checkpoint_every=" + std::to_string(every)};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return small_gpt_deck(all);
}

std::vector<std::vector<std::string>> pipeline_layouts_for(int n) {
  const std::string p2 = "parallel.pipeline=2", m3 = "parallel.micro_batches=3";
  const std::string inter = "parallel.schedule=interleaved", v2 = "parallel.virtual_stages=2";
  switch (n) {
    case 2:
      return {{p2, m3, "parallel.schedule=gpipe"},
              {p2, m3, "parallel.schedule=1f1b"},
              {p2, m3, "parallel.schedule=zb-h1"},
              {p2, m3, "parallel.schedule=zb-h2"},
              {p2, "parallel.micro_batches=4", inter, v2},
              {p2, m3, "parallel.schedule=1f1b", "parallel.last_stage_layers=4"}};  // 1 and 4 layers
    case 4:
      return {{"parallel.pipeline=4", m3, "parallel.schedule=1f1b"},
              {"parallel.pipeline=4", "parallel.micro_batches=2", "parallel.schedule=gpipe"},
              {"parallel.pipeline=4", "parallel.micro_batches=6", "parallel.schedule=zb-h1"},
              {"parallel.pipeline=4", m3, "parallel.schedule=zb-h2", "parallel.last_stage_layers=1"},  // 1, 1, 2, 1
              {"parallel.data=2", p2, m3, "parallel.schedule=gpipe"},
              {"parallel.data=2", p2, m3, "parallel.schedule=zb-h2", "parallel.zero=1"},
              {p2, m3, "parallel.schedule=1f1b", "parallel.tensor_cols=2"},
              {p2, m3, "parallel.schedule=zb-h1", "parallel.tensor_cols=2"},
              {"parallel.data=2", p2, "parallel.micro_batches=6", inter, v2},
              {p2, "parallel.micro_batches=4", inter, v2, "parallel.tensor_cols=2"}};
    case 8:
      return {{p2, m3, "parallel.schedule=1f1b", "parallel.tensor_mode=2d", "parallel.tensor_rows=2",
               "parallel.tensor_cols=2"},
              {p2, m3, "parallel.schedule=zb-h2", "parallel.tensor_mode=2d", "parallel.tensor_rows=2",
               "parallel.tensor_cols=2"},
              {p2, "parallel.micro_batches=2", inter, v2, "parallel.tensor_mode=2d", "parallel.tensor_rows=2",
               "parallel.tensor_cols=2"}};
    default:
      return {};
  }
}

}  // namespace

TEST_CASE("every flushing schedule on all ranks: GPT<double> loss and gradients equal serial", "[mpi][pipeline]") {
  const int n = world_size();
  if (n != 2 && n != 4) return;  // all ranks are stages: 2 or 4 of them
  ModelConfig m;
  m.n_layer = 9;  // uneven over 2 and 4 stages, and over 2 x 2 and 4 x 2 chunks
  m.n_embd = 12;
  m.n_head = 4;
  m.vocab_size = 40;
  m.seq_len = 5;
  const int64_t batch = 8, micro = 4;
  const auto [tokens, targets] = pattern_tokens(batch * m.seq_len, m.vocab_size);
  GPT<double> serial(m, 7);
  const double scale = 1.0 / double(batch * m.seq_len);
  serial.params().zero_grads();
  const double serial_loss = serial.forward({batch, m.seq_len}, tokens, targets) * scale;
  serial.backward({batch, m.seq_len}, scale);
  const auto serial_grads = test::to_host<double>(serial.params().grads());
  double largest = 0;
  for (double g : serial_grads) largest = std::max(largest, std::abs(g));

  Layout pc;
  pc.pipeline = n;
  Grid grid(pc, MPI_COMM_WORLD);
  std::vector<double> gpipe_grads;
  for (const Schedule schedule :
       {Schedule::GPipe, Schedule::OneFOneB, Schedule::ZBH1, Schedule::ZBH2, Schedule::Interleaved}) {
    const int v = schedule == Schedule::Interleaved ? 2 : 1;
    GPT<double> model(m, 7, {}, StagePlacement::interleaved(int(m.n_layer), n, v, grid.coords().pipeline));
    PipelineEngine<double> engine(model, grid, schedule, int(micro));
    Timers timers;
    SampleBatch<double> all;
    all.samples = batch;
    all.tokens = tokens;
    all.targets = targets;
    const double loss = engine.forward_backward(all, batch, timers).loss;
    const auto grads = test::gather_global(model.params(), model.params().grads(), grid.model().raw());
    double worst = 0;
    for (size_t i = 0; i < grads.size(); ++i) worst = std::max(worst, std::abs(grads[i] - serial_grads[i]));
    INFO(to_string(schedule) << " over " << n << " stages");
    CHECK(loss == Approx(serial_loss).epsilon(1e-13));
    CHECK(worst <= 1e-14 * largest);  // double precision: the micro-batch sums' order differs
    // every schedule adds each micro-batch's gradients in micro-batch order: GPipe's bits
    if (schedule == Schedule::GPipe) gpipe_grads = grads;
    CHECK(grads == gpipe_grads);
  }
}

TEST_CASE("GPipe, 1F1B, ZB-H1 and ZB-H2 pipelines equal the serial run", "[mpi][pipeline]") {
  const int n = world_size(), rank = world_rank();
  const auto layouts = pipeline_layouts_for(n);
  if (layouts.empty()) return;
  const auto [ser, ser_params] = test::serial_run<Training>(pipe_deck({}));
  for (const auto& layout : layouts) {
    Training par(pipe_deck(layout), MPI_COMM_WORLD, quiet());
    const TrainResult r = par.run();
    const auto params = test::global_params_of(par);
    if (rank == 0) {
      INFO(describe(layout) << " on " << n << " ranks");
      const double worst = compare_runs(r, ser);
      std::printf("pipeline equivalence, %s on %d ranks: worst loss rel diff %.2e, param max diff %.2e\n",
                  describe(layout).c_str(), n, worst, max_abs_diff(params, ser_params));
      // float sums in another order (micro-batch gradients accumulated one by one, the
      // tied embedding's two copies summed): seen <= 2.6e-8 relative in the losses and
      // <= 1.1e-5 absolute in the parameters (pipeline 2 x 1D 2); AdamW's normalisation
      // magnifies rounding in gradients near zero
      CHECK(worst < 3e-7);
      CHECK(max_abs_diff(params, ser_params) < 5e-5);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a checkpoint written by 2 stages restarts on 4 stages (another schedule) and on 1",
          "[mpi][pipeline][checkpoint]") {
  if (world_size() != 4) return;
  const int rank = world_rank();
  if (rank == 0) std::filesystem::remove_all("pipeline_test_runs");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> two = {"parallel.data=2", "parallel.pipeline=2", "parallel.micro_batches=3"};
  const TrainResult full = Training(pipe_deck(two, "ckpt2", 12, 6), MPI_COMM_WORLD, quiet(true)).run();
  const std::string ckpt = "pipeline_test_runs/ckpt2/checkpoints/ckpt_00000006.h5";
  const TrainResult four =
      Training(pipe_deck({"parallel.pipeline=4", "parallel.micro_batches=2", "parallel.schedule=zb-h2"}, "from2-4", 12),
               MPI_COMM_WORLD, quiet(false, ckpt))
          .run();
  CHECK(four.first_step == 6);
  REQUIRE(four.losses.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(four.losses[i] == Approx(full.losses[6 + i]).epsilon(3e-7));
  if (rank == 0) {
    const TrainResult one = Training(pipe_deck({}, "from2-1", 12), MPI_COMM_SELF, quiet(false, ckpt)).run();
    REQUIRE(one.losses.size() == 6);
    for (size_t i = 0; i < 6; ++i) CHECK(one.losses[i] == Approx(full.losses[6 + i]).epsilon(3e-7));
  }
  // and on 2 stages of 2 chunks each (ranks 0 and 1)
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
  if (pair != MPI_COMM_NULL) {
    const TrainResult inter = Training(pipe_deck({"parallel.pipeline=2", "parallel.micro_batches=4",
                                                  "parallel.schedule=interleaved", "parallel.virtual_stages=2"},
                                                 "from2-interleaved", 12),
                                       pair, quiet(false, ckpt))
                                  .run();
    REQUIRE(inter.losses.size() == 6);
    for (size_t i = 0; i < 6; ++i) CHECK(inter.losses[i] == Approx(full.losses[6 + i]).epsilon(3e-7));
    MPI_Comm_free(&pair);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
