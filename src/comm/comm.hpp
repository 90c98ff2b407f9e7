#pragma once
// Comm: the few collectives strata needs, over one MPI communicator. Each call is
// counted (calls, bytes, seconds) per operation kind so a run can report its
// communication volume.
//
// Where buffers live: vector sums (allreduce_sum of a view) take buffers in MemSpace,
// device memory in GPU builds. With the MPI backend, device data is staged through an
// explicit host mirror (MPICH here is not CUDA-aware); with the NCCL backend it is summed
// in place on the device. Scalars and broadcast bytes are host memory and always go by MPI.
#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/across_codec.hpp"
#include "comm/nccl_comm.hpp"
#include "comm/wire_model.hpp"
#include "core/deck_choices.hpp"
#include "core/tensor.hpp"
#include "core/trace.hpp"

namespace strata {

struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload: the size of the buffer each call works on, summed
  // What this rank sends with the bandwidth-optimal algorithm for a group of p ranks
  // (comm/wire_model.hpp): the quantity the V1D/V2D formulas count.
  double wire_bytes = 0;
  double seconds = 0;  // exposed: the time this rank spent inside the calls and their waits
  // Non-blocking transfers only: the time from the end of the post until the transfer was
  // seen complete (by progress()) or waited for, during which the rank computed: the
  // communication time the computation had the chance to hide (an upper bound on what it
  // hid, since completion is only seen at the rank's next MPI call).
  double overlapped_seconds = 0;
};

class Comm {
 public:
  // A posted non-blocking transfer (start_send, start_recv, start_broadcast,
  // start_reduce_sum), completed by wait(), moved along by progress(), or, a receive that
  // will not be matched, cancelled by cancel(). A default Request has nothing in flight.
  class Request {
   public:
    bool pending() const { return r_ != MPI_REQUEST_NULL; }

   private:
    friend class Comm;
    MPI_Request r_ = MPI_REQUEST_NULL;
    double posted_at = 0, post_end = 0;  // clock (Timers::now()) at the post's start and end
    double seen_done = 0;                // when progress() saw it complete (0: not yet)
    std::function<void()> land;          // run by wait() once the transfer is complete (a staged copy's way back)
  };

  // Does not take ownership of comm. The NCCL backend is set up collectively here.
  explicit Comm(MPI_Comm comm, CommBackend backend = CommBackend::Mpi);
  ~Comm();
  CommBackend backend() const { return nccl_ ? CommBackend::Nccl : CommBackend::Mpi; }
  MPI_Comm raw() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // In-place sum (max) over all ranks of a float or double buffer.
  void allreduce_sum(V1<float> buf);
  void allreduce_sum(V1<double> buf);
  void allreduce_max(V1<float> buf);
  void allreduce_max(V1<double> buf);
  double allreduce_sum(double x);
  double allreduce_max(double x);

  // The sums node by node (parallel.grad_sum = "nodes", set up by the Grid on the
  // replicas): from here on this communicator's vector sums (allreduce_sum of a float or
  // double view, and the started ones, then done at once) are a reduce-scatter over node
  // (this communicator's ranks on this rank's node, all nodes holding as many), an
  // all-reduce of this rank's block over across (the ranks at its place on every node) and
  // an all-gather over node, counted by those two (comm_by_node.cpp). Every rank gets the
  // same sum, in another order than one all-reduce's.
  // codec: the across part coded, with error feedback (comm/across_codec.hpp;
  // parallel.grad_compression), for float sums; nullptr: floats as they are.
  void sum_by_node(Comm& node, Comm& across, AcrossCodec* codec = nullptr) {
    node_ = &node;
    across_ = &across;
    codec_ = codec;
  }
  bool sums_by_node() const { return node_ != nullptr; }
  // The matrices of a float buffer this communicator will sum (for a codec that compresses
  // matrices: AcrossCodec::describe; nothing without one).
  void describe_matrices(const float* buffer, int64_t n, const std::function<std::vector<MatrixSpan>()>& spans) {
    if (codec_) codec_->describe(buffer, n, spans);
  }

  // Sums started during the backward and completed by finish_allreduces(); buffers must
  // not be touched in between. With NCCL they run on its stream, overlapping the
  // backward. With the MPI backend they are done at finish, as blocking all-reduces: MPI's
  // non-blocking ones only move inside MPI calls (no progress thread), and here four
  // 4 MB MPI_Iallreduce left to finish under 20 ms of computation each took 50-100 ms
  // to complete against 5 ms for one blocking 16 MB all-reduce (docs/planner.md).
  void start_allreduce_sum(V1<float> buf);
  void start_allreduce_sum(V1<double> buf);
  void finish_allreduces();
  // Root's bytes to everyone.
  void broadcast(void* data, int64_t bytes, int root);
  // Non-blocking, host memory (T = float or double): root's n values to everyone; the sum
  // of everyone's send (n values) into root's recv. Complete with wait().
  template <class T>
  Request start_broadcast(T* host_data, int64_t n, int root);
  template <class T>
  Request start_reduce_sum(const T* host_send, T* host_recv, int64_t n, int root);
  // Non-blocking, in place on host memory of size() blocks of n values (T = float or
  // double): every rank's block rank() to everyone (all-gather, counted as "allgather");
  // the sum over the ranks of their blocks rank() into block 0 (reduce-scatter, the other
  // blocks left undefined; counted as "reduce_scatter"). Complete with wait().
  // (These move inside MPI calls only: call progress() between pieces of computation.)
  template <class T>
  Request start_allgather_in_place(T* host_buf, int64_t n);
  template <class T>
  Request start_reduce_scatter_in_place(T* host_buf, int64_t n);
  // The same two in place on a buffer in MemSpace (device memory in GPU builds) of size()
  // equal blocks, leaving the sum of the ranks' blocks rank() in block rank() (the others
  // undefined) and every rank's block rank() everywhere. With NCCL they are queued on the
  // device stream, after the kernels before them and before those after them, and wait()
  // has nothing to do on the host; with MPI the buffer goes through a host copy (the buffer
  // itself in host builds) that wait() brings back. Complete with wait().
  template <class T>
  Request start_allgather_blocks(V1<T> buf);
  template <class T>
  Request start_reduce_scatter_blocks(V1<T> buf);
  // Non-blocking sum over the ranks of n host values, in place (counted as "allreduce").
  template <class T>
  Request start_allreduce_in_place(T* host_buf, int64_t n);
  // Waits for request (nothing when none is pending), counting the wait as kind's
  // (exposed) seconds and the time before it as kind's overlapped seconds.
  void wait(Request& request, const char* kind);
  // Lets MPI move pending non-blocking transfers along (MPI_Test on each request; done
  // ones become MPI_REQUEST_NULL): called between pieces of computation, since MPI
  // progresses large messages only inside its calls.
  void progress(Request* requests, int count);
  // Blocks until one of the pending requests completes (nothing when none is pending),
  // which progress() would then see done; waiting on it is left to wait(). The time counts
  // as kind's (exposed) seconds.
  void wait_any(Request* const* requests, int count, const char* kind);
  // A posted receive that will not be matched: cancelled and completed.
  static void cancel(Request& request);
  // Non-blocking point-to-point, host memory: n values to / from rank peer of this
  // communicator, matched by tag. Complete with wait(request, "send" / "recv").
  template <class T>
  Request start_send(const T* host_data, int64_t n, int peer, int tag);
  template <class T>
  Request start_recv(T* host_data, int64_t n, int peer, int tag);
  // send: size() blocks of n values, block j for rank j; recv: the blocks the ranks sent
  // this rank, in rank order (device memory; n = send.extent(0) / size()).
  template <class T>
  void alltoall(V1<const T> send, V1<T> recv);
  // Blocks of any size (MPI_Alltoallv, device memory staged through the host; with NCCL
  // grouped sends and receives between device buffers): send holds
  // size() blocks back to back, send_counts[j] values for rank j; recv gets the blocks the
  // ranks sent this rank in rank order, recv_counts[j] from rank j (which the caller
  // learnt first, by alltoall_counts). Counted as "alltoallv": the bytes sent, of which
  // those to other ranks cross the wire.
  template <class T>
  void alltoallv(V1<const T> send, const std::vector<int64_t>& send_counts, V1<T> recv,
                 const std::vector<int64_t>& recv_counts);
  // Host integers, n for each rank (send: size() * n): returns the n each rank sent this
  // one, in rank order (how many values an alltoallv will bring). Counted as "alltoall".
  std::vector<int64_t> alltoall_counts(const std::vector<int64_t>& send);
  // Host integers summed over the ranks, in place (routing statistics). Counted as "allreduce".
  void allreduce_sum(std::vector<int64_t>& values);
  // Host floats summed over the ranks, in place, as they are (never node by node: a codec's
  // own sums). Counted as "allreduce".
  void allreduce_sum(std::vector<float>& values);
  // Everyone's `bytes` bytes (host memory) side by side in rank order: all holds size() x
  // bytes. Counted as "allgather".
  void allgather_bytes(const void* mine, int64_t bytes, void* all);
  // Everyone's n values (device memory) side by side in rank order: recv holds size() * n.
  template <class T>
  void allgather(V1<const T> send, V1<T> recv);
  // The sum over ranks of send (size() * n values, device memory); this rank keeps block
  // rank() of it in recv (n values).
  template <class T>
  void reduce_scatter_sum(V1<const T> send, V1<T> recv);
  // In place on a device buffer of size() equal blocks (ZeRO-1's gradients and
  // parameters): reduce_scatter_blocks leaves in block rank() the sum over the ranks of
  // their blocks rank() (the other blocks are left undefined); allgather_blocks gives every
  // rank every rank's block. Counted per block, as reduce_scatter and allgather.
  template <class T>
  void reduce_scatter_blocks(V1<T> buf);
  template <class T>
  void allgather_blocks(V1<T> buf);
  void barrier();

  const std::map<std::string, CommStats>& stats() const { return stats_; }
  // With a recorder attached, every non-blocking transfer is an event on the rank's
  // "in flight" lane (post to completion) and every wait longer than 10 us one on its
  // main lane; name = the kind and this communicator's name.
  void set_trace(TraceRecorder* trace, std::string name) {
    trace_ = trace;
    trace_name_ = std::move(name);
  }
  TraceRecorder* trace() const { return trace_; }

 private:
  template <class T>
  void allreduce_impl(V1<T> buf, MPI_Op op, const char* kind);
  // Blocking MPI all-reduces of at most kAllreduceChunkBytes each: MPICH's shared-memory
  // all-reduce here slows from 5 ms for 16 MB to 115 ms for 32 MB (bench/plan_check found
  // it); pieces keep every call on the fast path and cost a few latencies.
  static constexpr int64_t kAllreduceChunkBytes = int64_t(4) << 20;
  template <class T>
  void sum_node_by_node(V1<T> buf);
  template <class T>
  void chunked_allreduce(T* data, int64_t n, MPI_Datatype type, MPI_Op op);
  template <class T>
  void start_allreduce_impl(V1<T> buf);
  double allreduce_scalar(double x, MPI_Op op, const char* kind);
  // payload bytes; the wire bytes are payload * wire_per_byte (wire_model.hpp)
  void count(const char* kind, int64_t bytes, double wire_per_byte, double seconds);
  // A posted non-blocking request, counted as kind (post started at clock t0).
  Request posted(MPI_Request r, const char* kind, int64_t bytes, Collective collective, double t0);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::map<std::string, CommStats> stats_;
  std::unique_ptr<NcclComm> nccl_;
  std::vector<V1<float>> deferred_float_;
  std::vector<V1<double>> deferred_double_;
  TraceRecorder* trace_ = nullptr;
  std::string trace_name_;
  Comm *node_ = nullptr, *across_ = nullptr;  // sum_by_node's
  AcrossCodec* codec_ = nullptr;
};

}  // namespace strata
