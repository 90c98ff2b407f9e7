// The run loop's lifecycle on its own, driven by a scripted job (TrainSteps) instead of
// a model: which rounds it asks for, when it validates and what it records, non-finite
// steps stopped or skipped on every rank alike, checkpoints and a restart from them.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "core/deck_reading.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"
#include "report/run_metrics.hpp"
#include "support/mpi_test_helpers.hpp"
#include "train/run_loop.hpp"

using namespace strata;

namespace {

// A job whose step losses come from a script (loss_at), with a tiny parameter store that
// the real OptimizerStep updates, and that records the rounds the loop asks for.
class ScriptedJob : public TrainSteps {
 public:
  ScriptedJob(const Deck& deck, int64_t round_steps, std::function<double(int64_t)> loss_at, bool classifier = false)
      : grid_(deck.parallel, MPI_COMM_WORLD), loss_at_(std::move(loss_at)), classifier_(classifier) {
    store_.add("w", {8}, Init::Normal, 0.1);
    store_.allocate(deck.run.seed);
    facts_.description = {"scripted job"};
    facts_.layout = "scripted";
    facts_.samples_per_step = 4;
    facts_.max_round_steps = round_steps;
    facts_.validates_at_end = classifier;
  }
  const Grid& grid() const override { return grid_; }
  ParamStore<float>& params() override { return store_; }
  const JobFacts& facts() const override { return facts_; }
  const RunMetrics& metrics() const override { return metrics_; }
  const OptimizerGroups& optimizer_groups() const override { return groups_; }
  std::vector<StepOutcome> train_round(int64_t first, int64_t count, OptimizerStep<float>& update, Timers&,
                                       const std::function<bool()>&) override {
    rounds.emplace_back(first, count);
    std::vector<StepOutcome> out;
    for (int64_t s = first; s < first + count; ++s) {
      Kokkos::deep_copy(store_.grads(), 0.01f);
      StepOutcome o = update.apply(store_, s, loss_at_(s));
      o.correct = 3;
      out.push_back(o);
    }
    return out;
  }
  Evaluation evaluate() override {
    ++evaluations;
    Evaluation e;
    e.loss = 1.5;
    if (classifier_) e.accuracy = 0.25;
    return e;
  }
  std::pair<int64_t, int64_t> memory() const override { return {0, 0}; }

  std::vector<std::pair<int64_t, int64_t>> rounds;  // (first step, steps)
  int evaluations = 0;

 private:
  Grid grid_;
  ParamStore<float> store_;
  std::function<double(int64_t)> loss_at_;
  bool classifier_;
  JobFacts facts_;
  ClassifierMetrics metrics_{4};
  OptimizerGroups groups_ = strata::optimizer_groups(grid_, store_);
};

Deck loop_deck(const std::vector<std::string>& overrides) {
  std::vector<std::string> o = {"parallel.data=" + std::to_string(test::world_size())};
  o.insert(o.end(), overrides.begin(), overrides.end());
  return parse_model_deck(
      "[run]\nname = \"loop\"\nout_dir = \"run_loop_test_runs\"\nsteps = 12\n[data]\nkind = \"random\"\n", "loop deck",
      o);
}

double steady(int64_t s) { return 2.0 - 0.01 * double(s); }

}  // namespace

TEST_CASE("the loop asks for rounds that end where it must look, and validates when due", "[mpi][run_loop]") {
  const Deck deck = loop_deck({"run.log_every=5", "run.val_every=3"});
  ScriptedJob job(deck, 4, steady, true);
  const TrainResult r = RunLoop(deck, test::quiet(), job).run();
  // step 1 alone; then up to 4 steps, ending after every step a log (5, 10), a validation
  // (3, 6, 9, 12) or the last step is due
  const std::vector<std::pair<int64_t, int64_t>> rounds = {{0, 1}, {1, 2}, {3, 2}, {5, 1}, {6, 3}, {9, 1}, {10, 2}};
  CHECK(job.rounds == rounds);
  REQUIRE(r.losses.size() == 12);
  CHECK(r.losses[11] == steady(11));
  const std::vector<std::pair<int64_t, double>> val = {{3, 1.5}, {6, 1.5}, {9, 1.5}, {12, 1.5}};
  CHECK(r.val == val);
  // the accuracy is recorded at every validation, logged or not (3 and 9 are not log steps)
  const std::vector<std::pair<int64_t, double>> acc = {{3, 0.25}, {6, 0.25}, {9, 0.25}, {12, 0.25}};
  CHECK(r.accuracy == acc);
  CHECK(job.evaluations == 4);
}

TEST_CASE("a non-finite step stops the run on every rank, or is skipped", "[mpi][run_loop]") {
  const auto nan_at_4 = [](int64_t s) { return s == 4 ? std::numeric_limits<double>::quiet_NaN() : steady(s); };
  {
    const Deck deck = loop_deck({"run.on_nonfinite=\"stop\""});
    ScriptedJob job(deck, 1, nan_at_4);
    CHECK_THROWS_AS(RunLoop(deck, test::quiet(), job).run(), DivergedError);
    CHECK(job.rounds.size() == 5);  // steps 1..5, the fifth not applied
  }
  {
    const Deck deck = loop_deck({"run.on_nonfinite=\"skip\""});
    ScriptedJob job(deck, 1, nan_at_4);
    const TrainResult r = RunLoop(deck, test::quiet(), job).run();
    CHECK(r.skipped_steps == 1);
    CHECK(r.losses.size() == 12);
  }
  {
    const Deck deck = loop_deck({"run.on_nonfinite=\"skip\"", "run.max_skipped_steps=3"});
    ScriptedJob job(deck, 1, [](int64_t s) { return s >= 6 ? std::numeric_limits<double>::infinity() : steady(s); });
    CHECK_THROWS_AS(RunLoop(deck, test::quiet(), job).run(), DivergedError);
    CHECK(job.rounds.size() == 9);  // three in a row skipped: steps 7, 8, 9
  }
}

TEST_CASE("checkpoints are published when due, and a restart resumes after the last", "[mpi][run_loop]") {
  if (test::world_rank() == 0) std::filesystem::remove_all("run_loop_test_runs/ckpt");
  MPI_Barrier(MPI_COMM_WORLD);
  const Deck deck = loop_deck({"run.name=\"ckpt\"", "run.checkpoint_every=4", "run.steps=8"});
  {
    ScriptedJob job(deck, 1, steady);
    const TrainResult r = RunLoop(deck, test::quiet(true), job).run();
    CHECK(r.losses.size() == 8);
  }
  CHECK(std::filesystem::exists("run_loop_test_runs/ckpt/checkpoints/ckpt_00000004.h5"));
  CHECK(std::filesystem::exists("run_loop_test_runs/ckpt/checkpoints/ckpt_00000008.h5"));
  CHECK(std::filesystem::exists("run_loop_test_runs/ckpt/metrics.csv"));
  const Deck longer = loop_deck({"run.name=\"ckpt\"", "run.checkpoint_every=4", "run.steps=12"});
  ScriptedJob job(longer, 1, steady);
  const TrainResult r = RunLoop(longer, test::quiet(true, "latest"), job).run();
  CHECK(r.first_step == 8);
  CHECK(r.losses.size() == 4);
  REQUIRE_FALSE(job.rounds.empty());
  CHECK(job.rounds.front().first == 8);
}
