#pragma once
// The image classifier's training job (model.kind = "resnet", data.kind = "images"):
// data -> engine -> gradient clipping -> AdamW, with test-set evaluation. The engine is
// the layer-parallel MGRIT solver (parallel.schedule = "mgrit": forward and adjoint over
// parallel.pipeline ranks), or the GPT's engines on the network as a StageModel (data
// parallel, or a GPipe / 1F1B pipeline), exact backpropagation. The run loop
// (run_loop.hpp) owns the lifecycle; set-up errors are agreed on by all ranks before
// training.
#include <mpi.h>

#include <memory>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "engine/layerpar/layer_parallel.hpp"
#include "engine/train_engine.hpp"
#include "io/image_dataset.hpp"
#include "model/resnet.hpp"
#include "train/run_loop.hpp"
#include "train/training_job.hpp"

namespace strata {

struct ClassifierResult {
  TrainResult train;                                  // losses per step, (step, test loss), timing
  std::vector<std::pair<int64_t, double>> accuracy;   // (step, test accuracy)
  std::vector<double> forward_factors;                // MGRIT forward convergence factor per logged step
};

class ClassifierTrainer : public TrainingJob {
 public:
  ClassifierTrainer(const Deck& deck, MPI_Comm world, TrainOptions opts = {});
  ~ClassifierTrainer() override;
  ClassifierResult run();
  ResNet<float>& model() { return *model_; }
  const Grid& grid() const override { return *grid_; }

  // TrainingJob
  ParamStore<float>& params() override { return model_->params(); }
  std::string layout() const override;
  void describe(const Log& log) override;
  int64_t samples_per_step() const override { return deck_.data.batch_size; }
  int64_t max_round_steps() const override { return 1; }
  std::vector<StepOutcome> train_round(int64_t first_step, int64_t count, OptimizerStep<float>& update, Timers& timers,
                                       const std::function<bool()>& stop_requested) override;
  Evaluation evaluate() override;
  bool validates_at_end() const override { return true; }
  void after_step(int64_t steps_done) override;
  std::vector<std::string> metric_columns() const override;
  int64_t activation_bytes() const override { return engine_->activation_bytes(); }
  int64_t weight_copy_bytes() const override { return engine_->weight_copy_bytes(); }
  std::string progress(const ProgressWindow& w, std::vector<double>& row) override;
  std::string done_line(int64_t steps_run, double seconds, double last_loss) const override;

 private:
  // Loads this replica's share of (split, step) into x_ / labels_.
  void load(Split split, int64_t step);
  // x_ and labels_ as the engines take them
  SampleBatch<float> samples() const;

  Deck deck_;
  TrainOptions opts_;
  std::unique_ptr<Grid> grid_;
  Log log_;
  std::unique_ptr<ImageDataset> data_;
  std::unique_ptr<ResNet<float>> model_;
  std::unique_ptr<TrainEngine<float>> engine_;  // MGRIT, data parallel, or the pipeline
  LayerParallel<float>* mgrit_ = nullptr;       // the engine, when it is MGRIT (its residuals, cold starts)
  Tensor2<float> x_;
  Tensor1<int32_t> labels_;
  StepOutcome last_;                                  // of the last step
  double window_correct_ = 0;                         // training samples right since the last progress line
  std::vector<std::pair<int64_t, double>> accuracy_;  // (step, test accuracy)
  std::vector<double> forward_factors_;
  std::unique_ptr<RunLoop> loop_;
};

}  // namespace strata
