#pragma once
// The pipeline driver: runs one stage's instruction list (schedule.hpp), whatever the
// schedule. Receives are posted ahead into ring buffers (a receive goes out as soon as its
// buffer's previous micro-batch has run its backward), sends are non-blocking, and a Recv
// instruction waits only for its own message, so transfers overlap the stage's compute.
// Activation caches are slots reused round-robin: as many as the schedule ever has
// micro-batches in flight on this stage (m for GPipe, min(p - r, m) for 1F1B), which is
// where 1F1B saves memory; a stage that runs each micro-batch's backward before its next
// forward keeps the loss layer's cache once (StageModel::share_loss_layer_cache).
// Interleaved lists run several chunks of the model per stage: caches, rings and send
// staging are kept per chunk, and messages are tagged with the chunk that receives them.
// Zero-bubble lists run a backward as its input half (which the previous stage waits
// for) and, later, its weight half. Buffers are staged through host mirrors for MPI (a
// no-op where the host can read device memory).
//
// Flushing schedules (GPipe, 1F1B, interleaved, ZB-H1, ZB-H2) run one mini-batch per
// forward_backward(); afterwards the two copies of the tied embedding (first and last
// stage) and the data replicas sum their gradients, and the trainer updates every stage
// at once.
//
// XPipe runs train_stream(): the micro-batches of K consecutive mini-batches stream
// through without a flush, every stage updates its own weights at its OptimizerStep
// instructions (data all-reduce, clipping by the stage's own gradient norm, AdamW), and
// every pass runs on weights predicted to its target (WeightPredictor). The tied
// embedding is updated by the first stage only, from its gradient plus the share the
// last stage sends; the last stage takes each new version (with its Adam moments) where
// the list says, and predicts its copy from the version it holds.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/pipeline/staleness_meter.hpp"
#include "engine/train_engine.hpp"
#include "model/stage_model.hpp"
#include "optim/adamw.hpp"
#include "optim/weight_prediction.hpp"

namespace strata {

// What an XPipe stream needs to update the weights inside it.
template <class T>
struct StreamUpdate {
  OptimizerStep<T>* step = nullptr;          // the update (its AdamW's steps_taken() counts updates)
  bool predict = true;                       // false: run every pass on the current weights
  StalenessMeter<T>* meter = nullptr;        // measures the weights each pass used, if set
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
class PipelineEngine : public TrainEngine<T> {
 public:
  // model: this rank's stage (its placement's stage of grid.shape().pipeline); the
  // schedule with micro_batches micro-batches per mini-batch. XPipe needs the model's
  // tied parameter (the GPT's embedding): its list exchanges it between the end stages.
  PipelineEngine(StageModel<T>& model, const Grid& grid, Schedule schedule, int micro_batches);
  ~PipelineEngine() override;
  bool asynchronous() const { return schedule_ == Schedule::XPipe; }
  // XPipe: streams of up to 1024 micro-batches (and at least 2p mini-batches): a longer
  // stream saves less than (p-1)/1024 of a drain, while its list grows (and costs time
  // to build, quadratically). Flushing schedules: one step.
  int64_t max_steps_per_call() const override {
    return asynchronous() ? std::max<int64_t>(2 * stages_, 1024 / micro_batches_) : 1;
  }
  // XPipe: one stream (train_stream), with weight prediction and staleness measurement as
  // set_stream_options says; flushing schedules: step after step.
  std::vector<StepOutcome> train_steps(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                       int64_t global_batch, OptimizerStep<T>& update, Timers& timers,
                                       const std::function<bool()>& stop_requested) override;
  void set_stream_options(bool predict, StalenessMeter<T>* meter) {
    predict_ = predict;
    meter_ = meter;
  }

  // Flushing schedules: one mini-batch; the gradients are left for the trainer's update.
  BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) override;
  // XPipe: mini-batches first_step, first_step + 1, ... (one per entry of batches),
  // updating the weights inside the stream; drained at the end, when every stage has
  // taken every update and both copies of the tied embedding agree. Returns one entry per
  // mini-batch trained: fewer than batches when update.stop_requested ended it early.
  std::vector<StreamStep> train_stream(int64_t first_step, const std::vector<SampleBatch<T>>& batches,
                                       int64_t global_batch, const StreamUpdate<T>& update, Timers& timers);
  BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) override;
  int64_t activation_bytes() const override;  // the caches of the micro-batches in flight and messages
  int64_t weight_copy_bytes() const override { return predictor_ ? predictor_->bytes() : 0; }
  // The XPipe list for a stream of `mini_batches` (printed by strata plan --schedule).
  const PipeSchedule& xpipe_schedule_for(int mini_batches);

 private:
  struct Buffer {  // one message: device view and its host mirror
    Tensor2<T> dev;
    typename Tensor2<T>::HostMirror host;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  struct Run;  // the state of one pass over a list
  void ensure_buffers(const BlockContext& ctx, const std::vector<int>& slots);  // per chunk; grows only
  void send(V2<const T> data, Buffer& staging, int peer, int tag);
  void receive_wait(Buffer& b);
  // Runs this stage's program of s over batches; returns the summed loss per mini-batch
  // (nonzero on the last stage only), and leaves the correct predictions' sums (models
  // that count them) in correct_.
  std::vector<double> run(const PipeSchedule& s, const std::vector<SampleBatch<T>>& batches, int64_t global_batch,
                          const StreamUpdate<T>* update, std::vector<double>* norms_squared, int64_t first_step,
                          Timers& timers);
  // The parts of run(), on its state.
  void list_receives(Run& st);  // the program's receives, in order
  void post_receives(Run& st);  // every receive whose ring buffer is free
  void run_pass(Run& st, const PipeInstr& in);
  void run_stream_instruction(Run& st, const PipeInstr& in);
  void restore_true_weights(Run& st);
  bool stop_here(Run& st, const PipeInstr& in, size_t at);
  void end_stream_early(Run& st, int k_end, size_t at);
  // XPipe's tied-embedding messages on the embedding communicator, through persistent
  // buffers: send_tied copies the parts (of equal length) out and sends one message each
  // without waiting; receive_tied waits for `parts` messages of n values and returns them.
  void send_tied(const std::vector<V1<const T>>& parts, int tag);
  V1<const T> receive_tied(int64_t n, int parts, int tag);

  using TrainEngine<T>::model_;
  Comm& data_;
  Comm& pipe_;      // the stages of this replica, ranked by stage
  Comm* embedding_;  // first and last stage (tied embedding), if p > 1
  MPI_Comm stop_comm_;  // XPipe: every rank of the job, for the in-stream stop agreement (Grid::control)
  Schedule schedule_;
  int micro_batches_ = 1;
  int stage_ = 0, stages_ = 1;
  PipeSchedule flushing_;                    // GPipe / 1F1B: the one list
  std::map<int, PipeSchedule> xpipe_;        // XPipe: the list per stream length
  // Per chunk of the stage (one unless interleaved): caches, receive rings, send staging.
  struct ChunkBuffers {
    std::vector<std::unique_ptr<StageCache>> acts;  // per slot: micro-batch mb uses mb % slots
    std::vector<Buffer> act_in, grad_in;            // receive rings: micro-batch mb uses mb % (slots + 1)
    std::vector<Buffer> act_out, grad_out;          // per slot (send staging)
  };
  std::vector<ChunkBuffers> chunks_;
  struct TiedMessage {
    Tensor1<T> dev;
    typename Tensor1<T>::HostMirror host;
    std::vector<MPI_Request> requests;  // one per part, in flight
    void resize(int64_t n);
    auto part(size_t i, int64_t n) const { return Kokkos::subview(dev, std::make_pair(int64_t(i) * n, int64_t(i + 1) * n)); }
  };
  // A stage sends one kind and receives the other (the last stage sends gradient shares
  // and takes versions); each message kind is sent once per mini-batch.
  TiedMessage tied_out_, tied_in_;
  std::unique_ptr<WeightPredictor<T>> predictor_;
  std::vector<double> correct_;  // per mini-batch of the last run (last stage)
  bool predict_ = true;                 // XPipe: weight prediction
  StalenessMeter<T>* meter_ = nullptr;  // XPipe: staleness measurement, if any
  // loss terms and correct predictions summed over the stages and replicas
  BatchResult reduce(double loss_sum, double correct_sum, int64_t global_batch);  // XPipe: its copy of the true weights is kept
};

// What the stage the model is placed on sends in one run of s on one rank (comm/traffic.hpp),
// call for call: one mini-batch for GPipe and 1F1B with the gradient sums after it, a
// stream of s.mini_batches for XPipe with its in-stream updates and the sums at its end.
// Read off the stage's instruction list, as run() executes it. zero: ZeRO-1's sums
// (flushing schedules only).
template <class T>
Traffic pipeline_traffic(const StageModel<T>& model, const PipeSchedule& s, int data_ranks, int64_t local_batch,
                         bool zero = false);

}  // namespace strata
