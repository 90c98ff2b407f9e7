#include "train/train_job.hpp"

#include <algorithm>
#include <cmath>

#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/rank_threads.hpp"
#include "data/deck_data.hpp"
#include "engine/make_engine.hpp"
#include "model/make_model.hpp"

namespace strata {

TrainJob::TrainJob(const Deck& deck, MPI_Comm world, const JobOptions& options) : deck_(deck) {
  const auto& par = deck_.parallel;
  agreed(world, [&] {
    grid_ = std::make_unique<Grid>(par, world);
    require_precision_runs(deck_.model.precision);
  });
  agreed(world, [&] {
    data_ = make_batch_source(deck_, *grid_);
    if (deck_.data.kind == DataKind::Tokens)
      if (const auto tok = deck_tokenizer(deck_)) facts_.tokenizer_model = tok->serialized();
  });
  agreed(world, [&] { model_ = make_model(deck_, *grid_, data_->shape()); });
  agreed(world, [&] {
    if (par.measure_staleness) staleness_ = std::make_unique<StalenessMeter<float>>();
    engine_ = make_engine(deck_, *grid_, *model_, staleness_.get());
    groups_ = strata::optimizer_groups(*grid_, model_->params());
  });
  describe(options);
}

TrainJob::~TrainJob() = default;

namespace {

// A model's metrics with its engine's columns and fields after them (MGRIT's residuals).
class ModelAndEngineMetrics : public RunMetrics {
 public:
  ModelAndEngineMetrics(std::unique_ptr<RunMetrics> model, const TrainEngine<float>& engine)
      : model_(std::move(model)), engine_(engine) {}
  std::vector<std::string> columns() const override {
    std::vector<std::string> c = model_->columns();
    for (auto& e : engine_.metric_columns()) c.push_back(e);
    return c;
  }
  std::string progress(const ProgressFigures& w, std::vector<double>& row) const override {
    const std::string line = model_->progress(w, row);
    return line + engine_.progress(row);
  }
  std::string done_line(const RunTotals& r) const override { return model_->done_line(r); }

 private:
  std::unique_ptr<RunMetrics> model_;
  const TrainEngine<float>& engine_;
};

}  // namespace

// "strata: 2 threads per rank (--threads); rank 0 on CPUs 0-1, OMP_PROC_BIND=close OMP_PLACES=cores",
// and where rank 0's node has fewer CPUs than its ranks run threads, that it is oversubscribed
std::string TrainJob::threads_line(const std::string& origin) const {
  const int fewest = min_over(grid_->world(), rank_threads()), most = max_over(grid_->world(), rank_threads());
  const int on_node = node_share(grid_->world()).local_size;
  const std::string count = fewest == most ? std::to_string(most) : std::to_string(fewest) + "-" + std::to_string(most);
  std::string line = "strata: " + count + (most == 1 ? " thread" : " threads") + " per rank" +
                     (origin.empty() ? "" : " (" + origin + ")") + "; rank 0 on " + thread_binding();
  if (on_node * rank_threads() > cores_online())
    line += rank_threads() == 1 ? strfmt("; oversubscribed: %d ranks on a node of %d CPUs", on_node, cores_online())
                                : strfmt(
                                      "; oversubscribed: %d ranks x %d threads on a node of %d CPUs (fewer threads, or "
                                      "OMP_WAIT_POLICY=passive, which keeps waiting threads from spinning)",
                                      on_node, rank_threads(), cores_online());
  else if (rank_threads() > 1 && passive_wait_policy())
    line +=
        "; OMP_WAIT_POLICY=passive on cores of its own: every parallel region wakes sleeping threads (a step of 2 "
        "threads took 1.1-1.4x as long here; unset it)";
  return line;
}

// "strata: nodes node1 (ranks 0-1), node2 (ranks 2-3); across nodes: data; within a node:
// tensor", in the grid's numbering (said where it is not the launcher's)
std::string TrainJob::nodes_line() const {
  const bool moe = deck_.model.moe_experts > 0;  // (the expert groups exist without experts, unused)
  const auto list = [&](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names)
      if (moe || n.rfind("expert", 0) != 0) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  std::string line = std::string("strata: ") + (grid_->nodes() == 1 ? "node " : "nodes ") + grid_->nodes_line();
  if (grid_->nodes() > 1) {
    const std::string across = list(grid_->groups_across_nodes()), within = list(grid_->groups_within_nodes());
    if (!across.empty()) line += "; across nodes: " + across;
    if (!within.empty()) line += "; within a node: " + within;
  }
  if (grid_->reordered()) line += "; ranks numbered in node order (parallel.placement = \"nodes\")";
  return line;
}

void TrainJob::describe(const JobOptions& options) {
  facts_.layout = layout_name(deck_.parallel) + engine_->layout_detail();
  facts_.max_round_steps = engine_->max_steps_per_call();
  RunSetting run;
  run.ranks = grid_->world_size();
  run.data_ranks = grid_->data_size();
  run.layout = facts_.layout;
  run.data_line = data_->describe();
  run.probe_gemm = options.probe_gemm;
  RunDescription d = describe_model(deck_, *model_, run);
  facts_.description = std::move(d.lines);
  facts_.description.insert(facts_.description.end() - (facts_.description.empty() ? 0 : 1),
                            {threads_line(options.threads_origin), nodes_line()});
  facts_.samples_per_step = d.samples_per_step;
  facts_.validates_at_end = d.validates_at_end;
  metrics_ = std::make_unique<ModelAndEngineMetrics>(std::move(d.metrics), *engine_);
}

std::vector<StepOutcome> TrainJob::train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update,
                                               Timers& timers, const std::function<bool()>& stop_requested) {
  // a restart could begin at every checkpoint_every-th step: the uninterrupted run's
  // engine forgets there what a restart would not have
  const int64_t every = deck_.run.checkpoint_every;
  if (every > 0 && first_step > 0 && first_step % every == 0) engine_->at_restart_point();
  timers.start("data");
  std::vector<SampleBatch<float>> batches;
  for (int64_t k = 0; k < count; ++k) batches.push_back(data_->load(Split::Train, first_step + k, int(k)));
  timers.stop("data");
  return engine_->train_steps(first_step, batches, deck_.data.batch_size, update, timers, stop_requested);
}

Evaluation TrainJob::evaluate() {
  const int64_t gb = deck_.data.batch_size, batches = deck_.run.val_batches;
  double loss = 0, correct = 0;
  for (int64_t j = 0; j < batches; ++j) {
    const BatchResult r = engine_->evaluate(data_->load(Split::Validation, j, 0), gb);
    loss += r.loss;
    correct += double(r.correct);
  }
  Evaluation e;
  e.loss = loss / double(batches);
  if (facts_.validates_at_end) e.accuracy = correct / double(batches * gb);  // a classifier
  // the text the validation targets stand for: the same global sequences at every
  // evaluation and on every rank, counted once
  if (val_text_bytes_ == 0) val_text_bytes_ = data_->text_bytes(Split::Validation, batches);
  const double samples = double(batches) * double(facts_.samples_per_step);
  e.bits_per_byte = e.loss * samples / (val_text_bytes_ * std::log(2.0));  // NaN when the bytes are not known
  return e;
}

void TrainJob::report_end(const Log& log, TrainResult& result) {
  if (!staleness_) return;
  // one rank per stage reports (data replica 0, tensor coordinates 0,0); the others add zeros
  const auto& g = grid_->coords();
  const bool reports = g.data == 0 && g.row == 0 && g.col == 0;
  const auto& mine = staleness_->summary();
  const bool predicted = deck_.parallel.weight_prediction;
  log.info(std::string("xpipe staleness: mean |W - W_target| / |W_target| over the passes with s > 0, ") +
           (predicted ? "the predicted weights each pass ran on and the current ones"
                      : "the current weights each pass ran on (no prediction)"));
  result.staleness.assign(size_t(deck_.parallel.pipeline), {});
  for (int stage = 0; stage < int(result.staleness.size()); ++stage) {
    const bool here = reports && g.pipeline == stage;
    auto& s = result.staleness[size_t(stage)];
    s.passes = int64_t(grid_->everyone().allreduce_sum(here ? double(mine.passes) : 0.0));
    s.ahead = int64_t(grid_->everyone().allreduce_sum(here ? double(mine.ahead) : 0.0));
    s.sum_used = grid_->everyone().allreduce_sum(here ? mine.sum_used : 0.0);
    s.sum_current = grid_->everyone().allreduce_sum(here ? mine.sum_current : 0.0);
    if (predicted)
      log.info(
          strfmt("xpipe staleness stage %d: %lld of %lld passes with s > 0: predicted %.3e, current %.3e (ratio %.2f)",
                 stage, (long long)s.ahead, (long long)s.passes, s.mean_used(), s.mean_current(),
                 s.mean_current() > 0 ? s.mean_used() / s.mean_current() : 0.0));
    else
      log.info(strfmt("xpipe staleness stage %d: %lld of %lld passes with s > 0: current %.3e", stage,
                      (long long)s.ahead, (long long)s.passes, s.mean_current()));
  }
}

}  // namespace strata
