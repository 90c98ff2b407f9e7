#include "train/classifier_trainer.hpp"

#include <cmath>
#include <csignal>
#include <fstream>
#include <limits>

#include "comm/agree.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "io/checkpoint_dir.hpp"
#include "io/metrics_csv.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_clip.hpp"
#include "train/stop_signals.hpp"

namespace strata {
namespace {
int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
}  // namespace

ClassifierTrainer::ClassifierTrainer(const Deck& deck, MPI_Comm world, TrainOptions opts)
    : deck_(deck), opts_(opts), log_(opts.print ? rank_of(world) : -1) {
  std::exception_ptr err;
  try {
    grid_ = std::make_unique<Grid>(deck_.parallel, world);
    world_comm_ = std::make_unique<Comm>(grid_->world());
    data_comm_ = std::make_unique<Comm>(grid_->data_group());
    layer_comm_ = std::make_unique<Comm>(grid_->pipeline_group());
    model_comm_ = std::make_unique<Comm>(grid_->model_group());
    data_ = std::make_unique<ImageDataset>(deck_.data.dir, deck_.run.seed);
    ResNetConfig rc;
    rc.inputs = data_->pixels();
    rc.width = deck_.model.n_embd;
    rc.channels = deck_.model.channels;
    rc.steps = deck_.model.n_layer;
    rc.classes = data_->classes();
    rc.t_final = deck_.model.t_final;
    rc.init_std = deck_.model.init_std;
    rc.step_init_std = deck_.model.step_init_std;
    model_ = std::make_unique<ResNet<float>>(
        rc, deck_.run.seed,
        StagePlacement::balanced(int(rc.steps), int(deck_.parallel.pipeline), grid_->coords().pipeline));
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
    engine_ = std::make_unique<LayerParallel<float>>(*model_, *layer_comm_, *data_comm_, lb, o);
    x_ = Tensor2<float>("classifier.x", lb, rc.inputs);
    labels_ = Tensor1<int32_t>("classifier.labels", lb);
    if (opts_.write_outputs) run_dir_ = deck_.run.out_dir + "/" + deck_.run.name;
    if (!opts_.restart.empty()) {
      std::string path = opts_.restart;
      if (path == "latest") {
        if (run_dir_.empty()) throw UserError("--restart latest needs the run directory (outputs are off)");
        const auto latest = CheckpointDirectory(run_dir_ + "/checkpoints").latest();
        path = latest ? *latest : "";
      }
      if (!path.empty()) {
        start_ = read_model_checkpoint(path, model_->params());
        // the MGRIT warm start is not in the checkpoint: the first solves start from zero,
        // as the uninterrupted run's do after every checkpoint_every-th step
        log_.info(strfmt("strata: restart: read %s (step %lld)", path.c_str(), (long long)start_.step));
      }
    }
    if (opts_.write_outputs && grid_->world_rank() == 0) {
      make_directories(run_dir_ + "/checkpoints");
      std::ofstream(run_dir_ + "/deck.toml") << deck_.resolved_toml;
    }
  } catch (...) {
    err = std::current_exception();
  }
  agree_on_error(world, err);
}

ClassifierTrainer::~ClassifierTrainer() = default;

std::string ClassifierTrainer::layout() const {
  const auto& lp = deck_.layerpar;
  return strfmt("data=%d layers=%lld:mgrit L=%lld c=%lld %s %lld/%lld", grid_->data_size(),
                (long long)deck_.parallel.pipeline, (long long)lp.levels, (long long)lp.cfactor, lp.relaxation.c_str(),
                (long long)lp.fwd_iterations, (long long)lp.bwd_iterations);
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

std::pair<double, double> ClassifierTrainer::evaluate() {
  const int64_t gb = deck_.data.batch_size;
  double loss = 0, correct = 0;
  for (int64_t j = 0; j < deck_.run.val_batches; ++j) {
    load(Split::Validation, j);
    const auto r = engine_->evaluate(x_, labels_, gb);
    loss += r.loss;
    correct += double(r.correct);
  }
  return {loss / double(deck_.run.val_batches), correct / double(deck_.run.val_batches * gb)};
}

void ClassifierTrainer::write_checkpoint(TrainingState state) {
  CheckpointDirectory dir(run_dir_ + "/checkpoints");
  const double t0 = Timers::now();
  const int64_t bytes = write_model_checkpoint(dir.temp_path(state.step), grid_->world(), grid_->data_rank(),
                                               grid_->data_size(), model_->params(), state, deck_, layout());
  if (grid_->world_rank() == 0) dir.publish(state.step, deck_.run.keep_checkpoints);
  MPI_Barrier(grid_->world());
  last_checkpoint_seconds_ = Timers::now() - t0;
  log_.info(strfmt("strata: checkpoint %s: %.1f MiB in %.3f s", dir.final_path(state.step).c_str(),
                   double(bytes) / (1 << 20), last_checkpoint_seconds_));
}

ClassifierResult ClassifierTrainer::run() {
  const auto& rc = deck_.run;
  const int64_t gb = deck_.data.batch_size;
  const auto& cfg = model_->config();
  log_.info(strfmt("strata: ResNet %lld %s steps (T = %g), %lld -> %lld classes: %.3fM parameters; %lld train / "
                   "%lld test images from %s",
                   (long long)cfg.steps,
                   cfg.channels > 0 ? strfmt("3x3-convolution %lld-channel", (long long)cfg.channels).c_str()
                                    : strfmt("dense width-%lld", (long long)cfg.width).c_str(),
                   cfg.t_final, (long long)cfg.inputs, (long long)cfg.classes,
                   double(model_->params().global_numel()) / 1e6, (long long)data_->size(Split::Train),
                   (long long)data_->size(Split::Validation), deck_.data.dir.c_str()));
  log_.info(strfmt("strata: %d ranks (%s), global batch %lld, %lld steps%s", grid_->world_size(), layout().c_str(),
                   (long long)gb, (long long)rc.steps, run_dir_.empty() ? "" : ("; run dir " + run_dir_).c_str()));
  std::unique_ptr<MetricsCsv> metrics;
  if (!run_dir_.empty() && grid_->world_rank() == 0)
    metrics = std::make_unique<MetricsCsv>(
        run_dir_ + "/metrics.csv",
        std::vector<std::string>{"step", "loss", "train_acc", "val_loss", "val_acc", "lr", "grad_norm", "ms_per_step",
                                 "samples_per_s", "fwd_residual", "fwd_factor"},
        start_.step > 0 ? start_.step : -1);
  AdamW<float> optim(deck_.optim);
  optim.set_steps_taken(start_.optim_steps);
  ClassifierResult result;
  result.train.first_step = start_.step;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double t_start = Timers::now();
  double window_start = t_start, window_correct = 0;
  int64_t window_steps = 0;
  for (int64_t step = start_.step; step < rc.steps; ++step) {
    timers_.start("step");
    timers_.start("data");
    load(Split::Train, step);
    timers_.stop("data");
    timers_.start("forward_backward");
    const LayerParallelResult r = engine_->forward_backward(x_, labels_, gb);
    timers_.stop("forward_backward");
    timers_.start("optimizer");
    const double norm = clip_grad_norm<float>(model_->params(), model_comm_.get(), deck_.optim.grad_clip);
    const double lr = lr_at_step(deck_.optim, step, rc.steps);
    optim.step(model_->params(), lr);
    timers_.stop("optimizer");
    timers_.stop("step");
    result.train.losses.push_back(r.loss);
    window_correct += double(r.correct);
    ++window_steps;
    if (!std::isfinite(r.loss)) throw std::runtime_error(strfmt("loss is %f at step %lld", r.loss, (long long)step + 1));
    const bool last = step + 1 == rc.steps;
    double val = nan, acc = nan;
    if ((rc.val_every > 0 && (step + 1) % rc.val_every == 0) || last) {
      timers_.start("validation");
      std::tie(val, acc) = evaluate();
      window_start += timers_.stop("validation");
      result.train.val.emplace_back(step + 1, val);
      result.accuracy.emplace_back(step + 1, acc);
    }
    if ((step + 1) % rc.log_every == 0 || last || step == 0) {
      const double now = Timers::now(), dt = (now - window_start) / double(window_steps);
      const double fwd_res = r.forward.residuals.empty() ? nan : r.forward.residuals.back();
      const double factor = r.forward.convergence_factor();
      std::string line = strfmt("step %5lld/%lld | loss %.4f | train acc %.3f", (long long)step + 1, (long long)rc.steps,
                                r.loss, window_correct / double(window_steps * gb));
      if (!std::isnan(val)) line += strfmt(" | test loss %.4f acc %.4f", val, acc);
      line += strfmt(" | lr %.2e | norm %.3f | %.0f samples/s | %.1f ms/step", lr, norm, double(gb) / dt, dt * 1e3);
      if (!r.forward.residuals.empty())
        line += strfmt(" | mgrit fwd res %.1e (factor %.2f) bwd %d it", fwd_res, factor, r.backward.iterations);
      line += strfmt(" | mem %.0f MiB", double(peak_rss_bytes()) / (1 << 20));
      log_.info(line);
      if (metrics)
        metrics->row({double(step + 1), r.loss, window_correct / double(window_steps * gb), val, acc, lr, norm, dt * 1e3,
                      double(gb) / dt, fwd_res, factor});
      result.forward_factors.push_back(factor);
      window_start = now;
      window_steps = 0;
      window_correct = 0;
    }
    // a signal on any rank, or the wall-time budget (rank 0's clock), stops every rank after this step
    const bool out_of_time = grid_->world_rank() == 0 &&
                             out_of_walltime(rc.max_walltime, Timers::now() - t_start, step + 1 - start_.step,
                                             last_checkpoint_seconds_);
    const bool stop = world_comm_->allreduce_max(stop_signal_received() != 0 || out_of_time ? 1.0 : 0.0) > 0;
    const bool every = rc.checkpoint_every > 0 && ((step + 1) % rc.checkpoint_every == 0 || last);
    if (rc.checkpoint_every > 0 && (step + 1) % rc.checkpoint_every == 0) engine_->cold_start();
    if (!run_dir_.empty() && (every || stop)) {
      timers_.start("checkpoint");
      write_checkpoint({step + 1, optim.steps_taken(), (step + 1) * gb, val});
      window_start += timers_.stop("checkpoint");
    }
    if (stop && !last) {
      result.train.stopped_early = true;
      log_.info(strfmt("strata: stopping after step %lld of %lld (%s)%s", (long long)step + 1, (long long)rc.steps,
                       out_of_time ? "run.max_walltime" : "a signal", run_dir_.empty() ? "" : "; resume with --restart latest"));
      break;
    }
  }
  result.train.seconds = Timers::now() - t_start;
  const double loop = world_comm_->allreduce_max(result.train.seconds);
  log_.info(strfmt("strata: done: %zu steps in %.2f s%s", result.train.losses.size(), loop,
                   result.accuracy.empty() ? "" : strfmt(", test accuracy %.4f", result.accuracy.back().second).c_str()));
  log_.info("timer            total_s   calls   ms/call   % of loop   (max over ranks)");
  for (const auto& [name, e] : timers_.entries()) {
    const double s = world_comm_->allreduce_max(e.seconds);
    log_.info(strfmt("%-15s %8.3f %7lld %9.3f %10.1f", name.c_str(), s, (long long)e.calls,
                     1e3 * s / double(std::max<int64_t>(1, e.calls)), 100.0 * s / loop));
  }
  return result;
}

}  // namespace strata
