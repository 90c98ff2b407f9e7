#pragma once
// The pipeline driver: runs one stage's instruction list (schedule.hpp) for one step. All
// of the step's receives are posted first (non-blocking, one buffer per micro-batch and
// direction, matched by tag), sends are non-blocking, and a Recv instruction waits only for
// its own message, so transfers overlap the stage's compute. After the list: the two
// copies of the tied embedding sum their gradients (first and last stage), and the data
// replicas sum all gradients. Buffers are staged through host mirrors for MPI (a no-op
// where the host can read device memory). Activation caches are slots reused round-robin:
// as many as the schedule ever has micro-batches in flight on this stage (the simulation
// says: m for GPipe, min(p - r, m) for 1F1B), which is where 1F1B saves memory.
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "comm/grid.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/train_engine.hpp"
#include "model/gpt.hpp"

namespace strata {

template <class T>
class PipelineEngine : public TrainEngine<T> {
 public:
  // schedule: a flushing schedule (GPipe or 1F1B) for grid.shape().pipeline stages.
  PipelineEngine(GPT<T>& model, const Grid& grid, Comm& data_comm, PipeSchedule schedule);
  double forward_backward(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                          int64_t global_batch, Timers& timers) override;
  double evaluate(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                  int64_t global_batch) override;
  int64_t activation_bytes() const override;  // every micro-batch's activations and messages
  const Comm& pipeline_comm() const { return pipe_; }
  const Comm* embedding_comm() const { return embedding_.get(); }

 private:
  struct Buffer {  // one message: device view and its host mirror
    Tensor2<T> dev;
    typename Tensor2<T>::HostMirror host;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void ensure_buffers(const BlockContext& ctx);
  void send(V2<const T> data, Buffer& staging, int peer, int tag);
  void receive_wait(Buffer& b);

  GPT<T>& model_;
  Comm& data_;
  Comm pipe_;                         // the stages of this replica, ranked by stage
  std::unique_ptr<Comm> embedding_;   // first and last stage (tied embedding), if p > 1
  PipeSchedule schedule_;
  int stage_ = 0;
  int slots_ = 1;
  std::vector<GPTActivations<T>> acts_;                // per slot: micro-batch mb uses mb % slots_
  std::vector<Buffer> act_in_, grad_in_;               // per micro-batch (receives are posted early)
  std::vector<Buffer> act_out_, grad_out_;             // per slot (send staging)
};

}  // namespace strata
