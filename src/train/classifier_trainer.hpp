#pragma once
// The training loop of the image classifier (model.kind = "resnet", data.kind = "images"):
// data -> layer-parallel engine (MGRIT forward and adjoint over parallel.pipeline ranks,
// data replicas over parallel.data) -> gradient clipping -> AdamW -> metrics, test-set
// evaluation and checkpoints. Set-up errors are agreed on by all ranks before training.
#include <mpi.h>

#include <memory>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "core/timers.hpp"
#include "engine/layerpar/layer_parallel.hpp"
#include "io/image_dataset.hpp"
#include "train/model_checkpoint.hpp"
#include "train/trainer.hpp"

namespace strata {

struct ClassifierResult {
  TrainResult train;                                  // losses per step, (step, test loss), timing
  std::vector<std::pair<int64_t, double>> accuracy;   // (step, test accuracy)
  std::vector<double> forward_factors;                // MGRIT forward convergence factor per logged step
};

class ClassifierTrainer {
 public:
  ClassifierTrainer(const Deck& deck, MPI_Comm world, TrainOptions opts = {});
  ~ClassifierTrainer();
  ClassifierResult run();
  ResNet<float>& model() { return *model_; }
  const Grid& grid() const { return *grid_; }

 private:
  // Loads this replica's share of (split, step) into x_ / labels_.
  void load(Split split, int64_t step);
  // Mean loss and accuracy over run.val_batches test batches.
  std::pair<double, double> evaluate();
  void write_checkpoint(TrainingState state);
  std::string layout() const;

  Deck deck_;
  TrainOptions opts_;
  std::unique_ptr<Grid> grid_;
  std::unique_ptr<Comm> world_comm_, data_comm_, layer_comm_, model_comm_;
  Log log_;
  std::unique_ptr<ImageDataset> data_;
  std::unique_ptr<ResNet<float>> model_;
  std::unique_ptr<LayerParallel<float>> engine_;
  Tensor2<float> x_;
  Tensor1<int32_t> labels_;
  Timers timers_;
  std::string run_dir_;
  TrainingState start_;
  double last_checkpoint_seconds_ = 0;
};

}  // namespace strata
