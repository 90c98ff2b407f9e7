#pragma once
// The one executor of pipeline instruction lists (schedule.hpp): runs this stage's program
// of a list, whatever the schedule: training lists (GPipe, 1F1B, interleaved, zero bubble,
// XPipe's streams) and the forward-only list of an evaluation. Receives are posted ahead
// into ring buffers (a receive goes out as soon as its buffer's previous micro-batch is
// done with it: after its backward, or after its forward in a forward-only list), sends
// are non-blocking, and a Recv instruction waits only for its own message, so transfers
// overlap the stage's compute. Activation caches are slots reused round-robin: as many as
// the list ever has micro-batches in flight on this stage (m for GPipe, min(p - r, m) for
// 1F1B, one for a forward-only list), which is where 1F1B saves memory. Interleaved lists
// run several chunks of the model per stage: caches, rings and send staging are kept per
// chunk, and messages are tagged with the chunk that receives them. Zero-bubble lists run
// a backward as its input half (which the previous stage waits for) and, later, its
// weight half. Buffers are staged through host mirrors for MPI (a no-op where the host
// can read device memory).
//
// The executor runs the passes and the activation and gradient messages. Any other
// instruction (XPipe's updates, weight predictions and tied-embedding messages) goes to
// the caller's ListHooks, which may also switch the run to a shorter list (XPipe's early
// end); without hooks those instructions are no-ops (a flushing list's OptimizerStep: the
// update follows the list).
#include <array>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "core/timers.hpp"
#include "engine/pipeline/pass_delays.hpp"
#include "engine/pipeline/ready_dispatch.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/train_engine.hpp"
#include "model/stage_model.hpp"

namespace strata {

// What a list's instructions other than passes and their messages do (XPipe's engine).
class ListHooks {
 public:
  virtual ~ListHooks() = default;
  // Asked before the instruction at `at` of the program being run: a shorter program of
  // the same list family to continue in (at the same position), or nullptr.
  virtual const StageProgram* switch_before(const PipeInstr& in, size_t at) = 0;
  virtual void run(const PipeInstr& in) = 0;
};

// The sums of one run of a list on this stage, per mini-batch of the list (nonzero on the
// stage that holds the model's loss only).
struct ListSums {
  std::vector<double> loss;     // loss terms
  std::vector<double> correct;  // correct predictions (models that count them)
};

// One mini-batch's global mean loss and correct count from this stage's sums: summed over
// the stages and the data replicas (every rank gets the same).
template <class T>
BatchResult sum_over_stages(const StageModel<T>& model, Comm& pipe, Comm& data, double loss_sum, double correct_sum,
                            int64_t global_batch);

template <class T>
class StageExecutor {
 public:
  // model: this rank's stage; pipe: the stages of its replica, ranked by stage.
  StageExecutor(StageModel<T>& model, Comm& pipe);
  ~StageExecutor();
  StageExecutor(const StageExecutor&) = delete;
  StageExecutor& operator=(const StageExecutor&) = delete;

  // Runs this stage's program of s over batches (one per mini-batch of s, each the data
  // replica's share of global_batch) and waits for its sends. Gradients accumulate into
  // the model's store (not zeroed here). on_ready: told each gradient range the backwards
  // make final (StageModel::GradReadyFn; ZeRO-2's unit sums), every micro-batch.
  ListSums run(const PipeSchedule& s, const std::vector<SampleBatch<T>>& batches, int64_t global_batch, Timers& timers,
               ListHooks* hooks = nullptr, const typename StageModel<T>::GradReadyFn& on_ready = {});
  // An evaluation: a forward-only list (forward_only_schedule) over one mini-batch, its
  // sums over the stages and the data replicas.
  BatchResult evaluate(const PipeSchedule& forward_list, const SampleBatch<T>& batch, int64_t global_batch, Comm& data);
  // Bytes of the caches (the model's shared loss-layer cache included) and message
  // buffers (the largest list run so far).
  int64_t activation_bytes() const;
  // How training lists without hooks pick their passes (parallel.dispatch): in order, or
  // readiness first (ready_dispatch.hpp). group: the ranks that must run this stage's
  // passes in the same order, because their passes talk to each other (tensor, context,
  // expert and ZeRO-2/3 groups; Grid::stage_peers()); its rank 0 picks, the others follow.
  // in_flight_cap: parallel.dispatch_in_flight.
  void set_dispatch(Dispatch mode, Comm* group, int in_flight_cap) {
    dispatch_ = mode;
    group_ = group;
    in_flight_cap_ = in_flight_cap;
  }
  // Injected variability ([variability]): the delays after this stage's passes.
  void set_delays(const PassDelays& delays) { delays_ = delays; }

 private:
  struct Buffer {  // one message: device view and its host mirror
    Tensor2<T> dev;
    typename Tensor2<T>::HostMirror host;
    Comm::Request request;
  };
  // Per chunk of the stage (one unless interleaved): caches, receive rings, send staging.
  struct ChunkBuffers {
    std::vector<std::unique_ptr<StageCache>> acts;  // per slot: micro-batch mb uses mb % slots
    std::vector<Buffer> act_in, grad_in;            // receive rings: micro-batch mb uses mb % (slots + 1)
    std::vector<Buffer> act_out, grad_out;          // per slot (send staging)
  };
  struct Run;                                                                   // the state of one run of a list
  void ensure_buffers(const BlockContext& ctx, const std::vector<int>& slots);  // per chunk; grows only
  void send(V2<const T> data, Buffer& staging, int peer, int tag);
  void receive_wait(Buffer& b);
  void list_receives(Run& st);  // the program's receives, in order
  void post_receives(Run& st);  // every receive whose ring buffer is free
  void switch_program(Run& st, const StageProgram& shorter, size_t at);
  void run_instruction(Run& st, const PipeInstr& in);
  void run_in_order(Run& st);
  void run_ready(Run& st);
  int pick_ready(Run& st, const ReadyDispatch& tasks);  // waits until one is ready
  bool inputs_here(Run& st, const StageTask& t);        // its message arrived, its slot's sends left
  std::array<Buffer*, 3> task_buffers(Run& st, const StageTask& t);  // what it waits for (or null)
  double pass_done(Run& st, const PipeInstr& in, const char* timer);  // injected delay; stops the timer

  StageModel<T>& model_;
  Comm& pipe_;
  int stage_ = 0;
  std::vector<ChunkBuffers> chunks_;
  Dispatch dispatch_ = Dispatch::Order;
  Comm* group_ = nullptr;
  int in_flight_cap_ = 0;
  PassDelays delays_;
};

}  // namespace strata
