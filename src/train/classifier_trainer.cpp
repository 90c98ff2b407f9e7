#include "train/classifier_trainer.hpp"

#include <cmath>

#include "comm/agree.hpp"
#include "core/error.hpp"
#include "engine/data_parallel.hpp"
#include "engine/pipeline/pipeline_engine.hpp"

namespace strata {
ClassifierTrainer::ClassifierTrainer(const Deck& deck, MPI_Comm world, TrainOptions opts)
    : deck_(deck), opts_(opts), log_(opts.print ? rank_in(world) : -1) {
  // in phases, each agreed before the next one's collectives (see Trainer)
  agreed(world, [&] {
    grid_ = std::make_unique<Grid>(deck_.parallel, world);
    require_precision_runs(deck_.model.precision);
  });
  agreed(world, [&] { data_ = std::make_unique<ImageDataset>(deck_.data.dir, deck_.run.seed); });
  agreed(world, [&] {
    ResNetConfig rc;
    rc.inputs = data_->pixels();
    rc.width = deck_.model.n_embd;
    rc.channels = deck_.model.channels;
    rc.steps = deck_.model.n_layer;
    rc.classes = data_->classes();
    rc.t_final = deck_.model.t_final;
    rc.init_std = deck_.model.init_std;
    rc.step_init_std = deck_.model.step_init_std;
    rc.precision = deck_.model.precision;
    rc.recompute_states = deck_.parallel.recompute == Recompute::Full;
    model_ = std::make_unique<ResNet<float>>(
        rc, deck_.run.seed,
        StagePlacement::balanced(int(rc.steps), int(deck_.parallel.pipeline), grid_->coords().pipeline));
    shard_optimizer_state(model_->params(), *grid_, deck_.parallel.zero);
    const int64_t lb = deck_.data.batch_size / grid_->data_size();
    x_ = Tensor2<float>("classifier.x", lb, rc.inputs);
    labels_ = Tensor1<int32_t>("classifier.labels", lb);
  });
  agreed(world, [&] {
    const auto& par = deck_.parallel;
    if (par.schedule != Schedule::MGRIT) {
      if (par.pipeline > 1)
        engine_ = std::make_unique<PipelineEngine<float>>(*model_, *grid_, par.schedule, int(par.micro_batches));
      else
        engine_ = std::make_unique<DataParallel<float>>(*model_, grid_->data(), par.grad_bucket_mb * 1e6,
                                                        int(par.micro_batches));
      return;
    }
    const auto& lp = deck_.layerpar;
    LayerParallelOptions o;
    o.forward.levels = o.backward.levels = int(lp.levels);
    o.forward.cfactor = o.backward.cfactor = int(lp.cfactor);
    o.forward.tolerance = o.backward.tolerance = lp.tolerance;
    o.forward.fcf = o.backward.fcf = lp.relaxation == "FCF";
    o.forward.max_iterations = int(lp.fwd_iterations);
    o.backward.max_iterations = int(lp.bwd_iterations);
    o.warm_start = lp.warm_start;
    const int64_t lb = deck_.data.batch_size / grid_->data_size();
    auto mgrit = std::make_unique<LayerParallel<float>>(*model_, *grid_, lb, o);
    mgrit_ = mgrit.get();
    engine_ = std::move(mgrit);
  });
  // the MGRIT warm start is not in a checkpoint: after a restart the first solves start
  // from zero, as the uninterrupted run's do after every checkpoint_every-th step
  loop_ = std::make_unique<RunLoop>(deck_, opts_, *this, log_);
}

ClassifierTrainer::~ClassifierTrainer() = default;

std::string ClassifierTrainer::layout() const {
  const auto& lp = deck_.layerpar;
  if (!mgrit_) return layout_name(deck_.parallel);
  return layout_name(deck_.parallel) + strfmt(" L=%lld c=%lld %s %lld/%lld", (long long)lp.levels, (long long)lp.cfactor,
                                                lp.relaxation.c_str(), (long long)lp.fwd_iterations,
                                                (long long)lp.bwd_iterations);
}

SampleBatch<float> ClassifierTrainer::samples() const {
  SampleBatch<float> s;
  s.samples = int64_t(x_.extent(0));
  s.features = x_;
  s.targets = labels_;
  return s;
}

void ClassifierTrainer::describe(const Log& log) {
  const auto& cfg = model_->config();
  log.info(strfmt("strata: ResNet %lld %s steps (T = %g), %lld -> %lld classes: %.3fM parameters; %lld train / "
                  "%lld test images from %s",
                  (long long)cfg.steps,
                  cfg.channels > 0 ? strfmt("3x3-convolution %lld-channel", (long long)cfg.channels).c_str()
                                   : strfmt("dense width-%lld", (long long)cfg.width).c_str(),
                  cfg.t_final, (long long)cfg.inputs, (long long)cfg.classes,
                  double(model_->params().global_numel()) / 1e6, (long long)data_->size(Split::Train),
                  (long long)data_->size(Split::Validation), deck_.data.dir.c_str()));
  const std::string& run_dir = loop_->run_dir();
  log.info(strfmt("strata: %d ranks (%s), global batch %lld, %lld steps%s", grid_->world_size(), layout().c_str(),
                  (long long)deck_.data.batch_size, (long long)deck_.run.steps,
                  run_dir.empty() ? "" : ("; run dir " + run_dir).c_str()));
}

void ClassifierTrainer::load(Split split, int64_t step) {
  const int64_t gb = deck_.data.batch_size, lb = gb / grid_->data_size();
  auto hx = Kokkos::create_mirror_view(x_);
  auto hl = Kokkos::create_mirror_view(labels_);
  for (int64_t i = 0; i < lb; ++i)
    data_->sample(split, step, gb, grid_->data_rank() * lb + i, &hx(i, 0), &hl(i));
  Kokkos::deep_copy(x_, hx);
  Kokkos::deep_copy(labels_, hl);
}

Evaluation ClassifierTrainer::evaluate() {
  const int64_t gb = deck_.data.batch_size;
  double loss = 0, correct = 0;
  for (int64_t j = 0; j < deck_.run.val_batches; ++j) {
    load(Split::Validation, j);
    const BatchResult r = engine_->evaluate(samples(), gb);
    loss += r.loss;
    correct += double(r.correct);
  }
  Evaluation e;
  e.loss = loss / double(deck_.run.val_batches);
  e.accuracy = correct / double(deck_.run.val_batches * gb);
  return e;
}

std::vector<StepOutcome> ClassifierTrainer::train_round(int64_t first_step, int64_t, OptimizerStep<float>& update,
                                                        Timers& timers, const std::function<bool()>& stop_requested) {
  timers.start("data");
  load(Split::Train, first_step);
  timers.stop("data");
  const auto done = engine_->train_steps(first_step, {samples()}, deck_.data.batch_size, update, timers, stop_requested);
  last_ = done.back();
  window_correct_ += double(last_.correct);
  return done;
}

void ClassifierTrainer::after_step(int64_t steps_done) {
  if (mgrit_ && deck_.run.checkpoint_every > 0 && steps_done % deck_.run.checkpoint_every == 0) mgrit_->cold_start();
}

std::vector<std::string> ClassifierTrainer::metric_columns() const {
  return {"train_acc", "val_loss", "val_acc", "lr", "grad_norm", "ms_per_step", "samples_per_s", "fwd_residual",
          "fwd_factor"};
}

std::string ClassifierTrainer::progress(const ProgressWindow& w, std::vector<double>& row) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t gb = deck_.data.batch_size;
  const double dt = w.seconds / double(w.window_steps);
  const MgritStats none;
  const MgritStats& fwd = mgrit_ ? mgrit_->last().forward : none;
  const double fwd_res = fwd.residuals.empty() ? nan : fwd.residuals.back();
  const double factor = fwd.convergence_factor();
  const double train_acc = window_correct_ / double(w.window_steps * gb);
  std::string line = strfmt(" | train acc %.3f", train_acc);
  if (!std::isnan(w.val.loss)) {
    line += strfmt(" | test loss %.4f acc %.4f", w.val.loss, w.val.accuracy);
    accuracy_.emplace_back(w.step, w.val.accuracy);
  }
  line += strfmt(" | lr %.2e | norm %.3f | %.0f samples/s | %.1f ms/step", w.lr, w.last.grad_norm, double(gb) / dt,
                 dt * 1e3);
  if (!fwd.residuals.empty())
    line += strfmt(" | mgrit fwd res %.1e (factor %.2f) bwd %d it", fwd_res, factor, mgrit_->last().backward.iterations);
  row.insert(row.end(), {train_acc, w.val.loss, w.val.accuracy, w.lr, w.last.grad_norm, dt * 1e3, double(gb) / dt,
                         fwd_res, factor});
  forward_factors_.push_back(factor);
  window_correct_ = 0;
  return line;
}

std::string ClassifierTrainer::done_line(int64_t, double, double) const {
  return accuracy_.empty() ? "" : strfmt(", test accuracy %.4f", accuracy_.back().second);
}

ClassifierResult ClassifierTrainer::run() {
  ClassifierResult r;
  r.train = loop_->run();
  r.accuracy = accuracy_;
  r.forward_factors = forward_factors_;
  return r;
}

}  // namespace strata
