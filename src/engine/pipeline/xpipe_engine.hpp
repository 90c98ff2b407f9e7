#pragma once
// XPipe (Guan et al. 2019): the micro-batches of K consecutive mini-batches stream through
// the stages without a flush, run by the StageExecutor over the XPipe list of the stream's
// length. Every stage updates its own weights at its OptimizerStep instructions (data
// all-reduce, clipping by the stage's own gradient norm, AdamW), and every pass runs on
// weights predicted to its target (WeightPredictor). The tied embedding is updated by the
// first stage only, from its gradient plus the share the last stage sends; the last stage
// takes each new version (with its Adam moments) where the list says, and predicts its
// copy from the version it holds. Those instructions run here, as the executor's
// ListHooks; so does the early end of a stream when a rank asks to stop.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "engine/pipeline/executor_engine.hpp"
#include "engine/pipeline/staleness_meter.hpp"
#include "optim/weight_prediction.hpp"

namespace strata {

// What an XPipe stream needs to update the weights inside it.
template <class T>
struct StreamUpdate {
  OptimizerStep<T>* step = nullptr;    // the update (its AdamW's steps_taken() counts updates)
  bool predict = true;                 // false: run every pass on the current weights
  StalenessMeter<T>* meter = nullptr;  // measures the weights each pass used, if set
  // Asked at each of the stage's updates; when it is true on any rank, every rank ends
  // the stream early (after xpipe_stop_lookahead() more mini-batches), drained as usual.
  std::function<bool()> stop_requested;
};

// Per mini-batch of a stream: its global mean loss, and the norm of the gradient all
// stages applied (each stage clipped its own part).
struct StreamStep {
  double loss = 0, grad_norm = 0;
};

template <class T>
class XPipeEngine : public ExecutorEngine<T, TrainEngine<T>> {
 public:
  // model: this rank's stage; micro_batches per mini-batch (XPipe's T). p > 1 needs the
  // model's tied parameter (the GPT's embedding): the list exchanges it between the end
  // stages. predict and meter: as in StreamUpdate, for the run's train_steps.
  XPipeEngine(StageModel<T>& model, const Grid& grid, int micro_batches, bool predict = true,
              StalenessMeter<T>* meter = nullptr);
  ~XPipeEngine() override;
  // Streams of up to 1024 micro-batches (and at least 2p mini-batches): a longer stream
  // saves less than (p-1)/1024 of a drain, while its list grows (and costs time to build,
  // quadratically).
  int64_t max_steps_per_call() const override { return std::max<int64_t>(2 * stages_, 1024 / micro_batches_); }
  // One stream (train_stream), with the constructor's prediction and staleness options.
  std::vector<StepOutcome> train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                       int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                       const std::function<bool()>& stop_requested) override;
  // Mini-batches first_step, first_step + 1, ... (one per entry of batches), updating the
  // weights inside the stream; drained at the end, when every stage has taken every
  // update and both copies of the tied embedding agree. Returns one entry per mini-batch
  // trained: fewer than batches when update.stop_requested ended it early.
  std::vector<StreamStep> train_stream(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                       int64_t global_batch, const StreamUpdate<T>& update, Timers& timers);
  int64_t weight_copy_bytes() const override { return predictor_ ? predictor_->bytes() : 0; }
  // The list for a stream of `mini_batches` (printed by strata plan --schedule).
  const PipeSchedule& schedule_for(int mini_batches);

 private:
  class Stream;  // the hooks of one stream: updates, predictions, tied messages, stop
  struct TiedMessage {
    Tensor1<T> dev;
    typename Tensor1<T>::HostMirror host;
    std::vector<Comm::Request> requests;  // one per part, in flight
    void resize(int64_t n);
    auto part(size_t i, int64_t n) const {
      return Kokkos::subview(dev, std::make_pair(int64_t(i) * n, int64_t(i + 1) * n));
    }
  };
  // The tied embedding's messages on the embedding communicator, through persistent
  // buffers: send_tied copies the parts (of equal length) out and sends one message each
  // without waiting; receive_tied waits for `parts` messages of n values and returns them.
  void send_tied(const std::vector<V1<const T>>& parts, int tag);
  V1<const T> receive_tied(int64_t n, int parts, int tag);

  using Engine = ExecutorEngine<T, TrainEngine<T>>;
  using TrainEngine<T>::model_;
  using Engine::data_;
  using Engine::executor_;
  Comm& expert_data_;   // the ranks that hold the same experts (Grid::expert_replicas())
  Comm& pipe_;          // the stages of this replica, ranked by stage
  Comm* embedding_;     // first and last stage (tied embedding), if p > 1
  MPI_Comm stop_comm_;  // every rank of the job, for the in-stream stop agreement (Grid::control)
  int micro_batches_ = 1, stages_ = 1;
  bool predict_ = true;
  StalenessMeter<T>* meter_ = nullptr;
  std::map<int, PipeSchedule> lists_;  // per stream length
  // A stage sends one kind and receives the other (the last stage sends gradient shares
  // and takes versions); each message kind is sent once per mini-batch.
  TiedMessage tied_out_, tied_in_;
  std::unique_ptr<WeightPredictor<T>> predictor_;  // its copy of the true weights is kept
};

}  // namespace strata
