#include "comm/comm.hpp"

#include "comm/wire_model.hpp"
#include "core/error.hpp"
#include "core/timers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace strata {
namespace {
template <class T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
}  // namespace

Comm::Comm(MPI_Comm comm, CommBackend backend) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (backend == CommBackend::Nccl) nccl_ = std::make_unique<NcclComm>(comm_);
}

Comm::~Comm() = default;

void Comm::count(const char* kind, int64_t bytes, double wire_per_byte, double seconds) {
  auto& s = stats_[kind];
  s.calls += 1;
  if (size_ > 1) {
    s.bytes += bytes;
    s.wire_bytes += double(bytes) * wire_per_byte;
  }
  s.seconds += seconds;
}

template <class T>
void Comm::chunked_allreduce(T* data, int64_t n, MPI_Datatype type, MPI_Op op) {
  const int64_t chunk = kAllreduceChunkBytes / int64_t(sizeof(T));
  for (int64_t begin = 0; begin < n; begin += chunk)
    MPI_Allreduce(MPI_IN_PLACE, data + begin, int(std::min(chunk, n - begin)), type, op, comm_);
}

template <class T>
void Comm::allreduce_impl(V1<T> buf, MPI_Op op, const char* kind) {
  const int64_t n = buf.extent(0);
  const MPI_Datatype type = mpi_type<T>();
  if (node_ && op == MPI_SUM) return sum_node_by_node(buf);
  const double t0 = MPI_Wtime();
  if (size_ > 1 && n > 0) {
    Kokkos::fence();  // the producer kernels must be done before the buffer is read
    if (nccl_ && op == MPI_SUM) {
      nccl_->allreduce_sum(buf.data(), n, sizeof(T) == sizeof(double));
    } else if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
      chunked_allreduce(buf.data(), n, type, op);
    } else {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);
      chunked_allreduce(host.data(), n, type, op);
      Kokkos::deep_copy(buf, host);
    }
  }
  count(kind, n * int64_t(sizeof(T)), wire_factor(Collective::AllReduce, size_), MPI_Wtime() - t0);
}

void Comm::allreduce_sum(V1<float> buf) { allreduce_impl(buf, MPI_SUM, "allreduce"); }
void Comm::allreduce_sum(V1<double> buf) { allreduce_impl(buf, MPI_SUM, "allreduce"); }
void Comm::allreduce_max(V1<float> buf) { allreduce_impl(buf, MPI_MAX, "allreduce_max"); }
void Comm::allreduce_max(V1<double> buf) { allreduce_impl(buf, MPI_MAX, "allreduce_max"); }

template <class T>
void Comm::start_allreduce_impl(V1<T> buf) {
  const int64_t n = buf.extent(0);
  if (size_ == 1 || n == 0) return;
  if (node_) return sum_node_by_node(buf);  // (MPI's started sums are done at finish anyway)
  const double t0 = MPI_Wtime();
  Kokkos::fence();  // the gradient kernels that produced buf must be done
  if (nccl_) {
    nccl_->allreduce_sum(buf.data(), n, sizeof(T) == sizeof(double), /*wait=*/false);
  } else {
    if constexpr (sizeof(T) == sizeof(double))
      deferred_double_.push_back(buf);
    else
      deferred_float_.push_back(buf);
  }
  const double dt = MPI_Wtime() - t0;
  count("allreduce_overlapped", n * int64_t(sizeof(T)), wire_factor(Collective::AllReduce, size_), dt);
}

void Comm::start_allreduce_sum(V1<float> buf) { start_allreduce_impl(buf); }
void Comm::start_allreduce_sum(V1<double> buf) { start_allreduce_impl(buf); }

void Comm::finish_allreduces() {
  const double t0 = MPI_Wtime();
  if (nccl_) nccl_->synchronize();
  const auto staged = [&](auto& list, MPI_Datatype type) {
    for (auto& buf : list) {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);
      chunked_allreduce(host.data(), int64_t(host.size()), type, MPI_SUM);
      Kokkos::deep_copy(buf, host);
    }
    list.clear();
  };
  staged(deferred_float_, MPI_FLOAT);
  staged(deferred_double_, MPI_DOUBLE);
  stats_["allreduce_overlapped"].seconds += MPI_Wtime() - t0;
}

double Comm::allreduce_scalar(double x, MPI_Op op, const char* kind) {
  const double t0 = MPI_Wtime();
  double out = x;
  if (size_ > 1) MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, op, comm_);
  count(kind, int64_t(sizeof(double)), wire_factor(Collective::AllReduce, size_), MPI_Wtime() - t0);
  return out;
}
double Comm::allreduce_sum(double x) { return allreduce_scalar(x, MPI_SUM, "allreduce_scalar"); }
double Comm::allreduce_max(double x) { return allreduce_scalar(x, MPI_MAX, "allreduce_scalar"); }
void Comm::broadcast(void* data, int64_t bytes, int root) {
  const double t0 = MPI_Wtime();
  if (size_ > 1) MPI_Bcast(data, int(bytes), MPI_BYTE, root, comm_);
  count("broadcast", bytes, wire_factor(Collective::Broadcast, size_), MPI_Wtime() - t0);
}

Comm::Request Comm::posted(MPI_Request r, const char* kind, int64_t bytes, Collective collective, double t0) {
  Request out;
  out.r_ = r;
  out.posted_at = t0;
  out.post_end = Timers::now();
  count(kind, bytes, wire_factor(collective, size_), out.post_end - t0);
  return out;
}

template <class T>
Comm::Request Comm::start_broadcast(T* host_data, int64_t n, int root) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  if (size_ > 1) MPI_Ibcast(host_data, int(n), mpi_type<T>(), root, comm_, &r);
  return posted(r, "broadcast", n * int64_t(sizeof(T)), Collective::Broadcast, t0);
}

template <class T>
Comm::Request Comm::start_reduce_sum(const T* host_send, T* host_recv, int64_t n, int root) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  if (size_ > 1)
    MPI_Ireduce(host_send, host_recv, int(n), mpi_type<T>(), MPI_SUM, root, comm_, &r);
  else
    std::copy(host_send, host_send + n, host_recv);
  return posted(r, "reduce", n * int64_t(sizeof(T)), Collective::Reduce, t0);
}

template <class T>
Comm::Request Comm::start_allgather_in_place(T* host_buf, int64_t n) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  if (size_ > 1 && n > 0)
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host_buf, int(n), mpi_type<T>(), comm_, &r);
  return posted(r, "allgather", n * int64_t(sizeof(T)), Collective::AllGather, t0);
}

template <class T>
Comm::Request Comm::start_reduce_scatter_in_place(T* host_buf, int64_t n) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  if (size_ > 1 && n > 0) MPI_Ireduce_scatter_block(MPI_IN_PLACE, host_buf, int(n), mpi_type<T>(), MPI_SUM, comm_, &r);
  return posted(r, "reduce_scatter", n * int64_t(sizeof(T)), Collective::ReduceScatter, t0);
}

template <class T>
Comm::Request Comm::start_allgather_blocks(V1<T> buf) {
  const int64_t n = buf.extent(0) / size_;
  if (size_ == 1 || n == 0) return Request();
  Kokkos::fence();  // the kernels that wrote this rank's block must be done
  if (nccl_) {
    const double t0 = Timers::now();
    nccl_->allgather(buf.data(), n, sizeof(T) == sizeof(double), /*wait=*/false);
    return posted(MPI_REQUEST_NULL, "allgather", n * int64_t(sizeof(T)), Collective::AllGather, t0);
  }
  auto host = Kokkos::create_mirror_view(buf);  // buf itself where the host can read it
  const auto mine = std::make_pair(int64_t(rank_) * n, int64_t(rank_ + 1) * n);
  if (host.data() != buf.data()) Kokkos::deep_copy(Kokkos::subview(host, mine), Kokkos::subview(buf, mine));
  Request r = start_allgather_in_place(host.data(), n);
  if (host.data() != buf.data()) r.land = [buf, host] { Kokkos::deep_copy(buf, host); };
  return r;
}

template <class T>
Comm::Request Comm::start_reduce_scatter_blocks(V1<T> buf) {
  const int64_t n = buf.extent(0) / size_;
  if (size_ == 1 || n == 0) return Request();
  Kokkos::fence();  // the kernels that wrote the buffer must be done
  if (nccl_) {
    const double t0 = Timers::now();
    nccl_->reduce_scatter_sum(buf.data(), n, sizeof(T) == sizeof(double), /*wait=*/false);
    return posted(MPI_REQUEST_NULL, "reduce_scatter", n * int64_t(sizeof(T)), Collective::ReduceScatter, t0);
  }
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);  // buf itself on the host
  Request r = start_reduce_scatter_in_place(host.data(), n);
  const auto mine = std::make_pair(int64_t(rank_) * n, int64_t(rank_ + 1) * n);
  r.land = [buf, host, n, mine] {  // MPI's in-place form leaves the sum in block 0
    if (mine.first > 0) std::memmove(host.data() + mine.first, host.data(), size_t(n) * sizeof(T));
    if (host.data() != buf.data()) Kokkos::deep_copy(Kokkos::subview(buf, mine), Kokkos::subview(host, mine));
  };
  return r;
}

template <class T>
Comm::Request Comm::start_allreduce_in_place(T* host_buf, int64_t n) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  if (size_ > 1 && n > 0) MPI_Iallreduce(MPI_IN_PLACE, host_buf, int(n), mpi_type<T>(), MPI_SUM, comm_, &r);
  return posted(r, "allreduce", n * int64_t(sizeof(T)), Collective::AllReduce, t0);
}

template <class T>
Comm::Request Comm::start_send(const T* host_data, int64_t n, int peer, int tag) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Isend(host_data, int(n), mpi_type<T>(), peer, tag, comm_, &r);
  return posted(r, "send", n * int64_t(sizeof(T)), Collective::Send, t0);
}

template <class T>
Comm::Request Comm::start_recv(T* host_data, int64_t n, int peer, int tag) {
  const double t0 = Timers::now();
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Irecv(host_data, int(n), mpi_type<T>(), peer, tag, comm_, &r);
  return posted(r, "recv", 0, Collective::Send, t0);  // bytes are counted once, by the sender
}

void Comm::progress(Request* requests, int count) {
  for (int i = 0; i < count; ++i) {
    int done = 0;
    if (!requests[i].pending()) continue;
    MPI_Test(&requests[i].r_, &done, MPI_STATUS_IGNORE);
    if (done) requests[i].seen_done = Timers::now();
  }
}

void Comm::wait(Request& request, const char* kind) {
  if (request.post_end == 0) return;  // nothing was posted
  const double t0 = Timers::now();
  if (request.pending()) MPI_Wait(&request.r_, MPI_STATUS_IGNORE);
  if (request.land) request.land();
  const double t1 = Timers::now();
  const double done = request.seen_done > 0 ? request.seen_done : t0;
  auto& s = stats_[kind];
  s.seconds += t1 - t0;
  s.overlapped_seconds += std::max(0.0, done - request.post_end);
  if (trace_) {
    trace_->add(std::string(kind) + " " + trace_name_, "in flight", request.posted_at,
                request.seen_done > 0 ? request.seen_done : t1, 1);
    if (t1 - t0 > 1e-5) trace_->add("wait " + std::string(kind) + " " + trace_name_, "comm wait", t0, t1);
  }
  request = Request();
}

void Comm::wait_any(Request* const* requests, int count, const char* kind) {
  std::vector<MPI_Request> raw(size_t(count), MPI_REQUEST_NULL);
  for (int i = 0; i < count; ++i) raw[size_t(i)] = requests[i]->r_;
  int done = MPI_UNDEFINED;
  const double t0 = Timers::now();
  MPI_Waitany(count, raw.data(), &done, MPI_STATUS_IGNORE);
  const double t1 = Timers::now();
  stats_[kind].seconds += t1 - t0;
  if (trace_ && t1 - t0 > 1e-5) trace_->add("wait any " + std::string(kind) + " " + trace_name_, "comm wait", t0, t1);
  if (done == MPI_UNDEFINED) return;
  requests[done]->r_ = raw[size_t(done)];  // MPI_REQUEST_NULL now
  requests[done]->seen_done = t1;
}

void Comm::cancel(Request& request) {
  if (!request.pending()) return;
  MPI_Cancel(&request.r_);
  MPI_Wait(&request.r_, MPI_STATUS_IGNORE);
  request = Request();
}

template <class T>
void Comm::allgather(V1<const T> send, V1<T> recv) {
  const int64_t n = send.extent(0);
  const double t0 = MPI_Wtime();
  Kokkos::fence();
  auto hs = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), send);
  auto hr = Kokkos::create_mirror_view(recv);
  MPI_Allgather(hs.data(), int(n), mpi_type<T>(), hr.data(), int(n), mpi_type<T>(), comm_);
  Kokkos::deep_copy(recv, hr);
  count("allgather", n * int64_t(sizeof(T)), wire_factor(Collective::AllGather, size_), MPI_Wtime() - t0);
}

void Comm::allgather_bytes(const void* mine, int64_t bytes, void* all) {
  const double t0 = MPI_Wtime();
  MPI_Allgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE, comm_);
  count("allgather", bytes, wire_factor(Collective::AllGather, size_), MPI_Wtime() - t0);
}

template <class T>
void Comm::alltoall(V1<const T> send, V1<T> recv) {
  const int64_t n = send.extent(0) / size_;
  const double t0 = MPI_Wtime();
  Kokkos::fence();
  auto hs = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), send);
  auto hr = Kokkos::create_mirror_view(recv);
  MPI_Alltoall(hs.data(), int(n), mpi_type<T>(), hr.data(), int(n), mpi_type<T>(), comm_);
  Kokkos::deep_copy(recv, hr);
  count("alltoall", int64_t(send.extent(0)) * int64_t(sizeof(T)), wire_factor(Collective::AllToAll, size_),
        MPI_Wtime() - t0);
}

template <class T>
void Comm::alltoallv(V1<const T> send, const std::vector<int64_t>& send_counts, V1<T> recv,
                     const std::vector<int64_t>& recv_counts) {
  const double t0 = MPI_Wtime();
  if (int(send_counts.size()) != size_ || int(recv_counts.size()) != size_)
    throw std::logic_error("Comm::alltoallv: one count per rank");
  std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
  int64_t s_at = 0, r_at = 0, to_others = 0;
  for (int j = 0; j < size_; ++j) {
    if (s_at + send_counts[j] > INT32_MAX || r_at + recv_counts[j] > INT32_MAX)
      throw std::logic_error("Comm::alltoallv: more than 2^31 values");
    sc[j] = int(send_counts[j]), sd[j] = int(s_at), rc[j] = int(recv_counts[j]), rd[j] = int(r_at);
    s_at += send_counts[j], r_at += recv_counts[j];
    if (j != rank_) to_others += send_counts[j];
  }
  if (s_at > int64_t(send.extent(0)) || r_at > int64_t(recv.extent(0)))
    throw std::logic_error("Comm::alltoallv: the counts exceed the buffers");
  Kokkos::fence();
  if (nccl_) {  // device to device
    nccl_->alltoallv(send.data(), send_counts.data(), recv.data(), recv_counts.data(), sizeof(T) == sizeof(double));
  } else {
    auto hs = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), send);
    auto hr = Kokkos::create_mirror_view(recv);
    MPI_Alltoallv(hs.data(), sc.data(), sd.data(), mpi_type<T>(), hr.data(), rc.data(), rd.data(), mpi_type<T>(),
                  comm_);
    Kokkos::deep_copy(recv, hr);
  }
  const int64_t bytes = s_at * int64_t(sizeof(T));
  count("alltoallv", bytes, bytes > 0 ? double(to_others) / double(s_at) : 0.0, MPI_Wtime() - t0);
}

std::vector<int64_t> Comm::alltoall_counts(const std::vector<int64_t>& send) {
  const double t0 = MPI_Wtime();
  const int n = int(send.size()) / size_;
  std::vector<int64_t> recv(send.size());
  MPI_Alltoall(send.data(), n, MPI_INT64_T, recv.data(), n, MPI_INT64_T, comm_);
  count("alltoall", int64_t(send.size() * sizeof(int64_t)), wire_factor(Collective::AllToAll, size_), MPI_Wtime() - t0);
  return recv;
}

void Comm::allreduce_sum(std::vector<int64_t>& values) {
  const double t0 = MPI_Wtime();
  if (size_ > 1 && !values.empty())
    MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_INT64_T, MPI_SUM, comm_);
  count("allreduce", int64_t(values.size() * sizeof(int64_t)), wire_factor(Collective::AllReduce, size_),
        MPI_Wtime() - t0);
}

void Comm::allreduce_sum(std::vector<float>& values) {
  const double t0 = MPI_Wtime();
  if (size_ > 1 && !values.empty()) chunked_allreduce(values.data(), int64_t(values.size()), MPI_FLOAT, MPI_SUM);
  count("allreduce", int64_t(values.size() * sizeof(float)), wire_factor(Collective::AllReduce, size_),
        MPI_Wtime() - t0);
}

template <class T>
void Comm::reduce_scatter_sum(V1<const T> send, V1<T> recv) {
  const int64_t n = recv.extent(0);
  const double t0 = MPI_Wtime();
  Kokkos::fence();
  auto hs = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), send);
  auto hr = Kokkos::create_mirror_view(recv);
  MPI_Reduce_scatter_block(hs.data(), hr.data(), int(n), mpi_type<T>(), MPI_SUM, comm_);
  Kokkos::deep_copy(recv, hr);
  count("reduce_scatter", n * int64_t(sizeof(T)), wire_factor(Collective::ReduceScatter, size_), MPI_Wtime() - t0);
}

template <class T>
void Comm::reduce_scatter_blocks(V1<T> buf) {
  const int64_t n = buf.extent(0) / size_;
  const double t0 = MPI_Wtime();
  if (size_ > 1 && n > 0) {
    Kokkos::fence();
    if (nccl_) {
      nccl_->reduce_scatter_sum(buf.data(), n, sizeof(T) == sizeof(double));
    } else {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);
      // in place: the sum of block rank() arrives in block 0
      MPI_Reduce_scatter_block(MPI_IN_PLACE, host.data(), int(n), mpi_type<T>(), MPI_SUM, comm_);
      if (rank_ > 0) std::memmove(host.data() + rank_ * n, host.data(), size_t(n) * sizeof(T));
      Kokkos::deep_copy(buf, host);
    }
  }
  count("reduce_scatter", n * int64_t(sizeof(T)), wire_factor(Collective::ReduceScatter, size_), MPI_Wtime() - t0);
}

template <class T>
void Comm::allgather_blocks(V1<T> buf) {
  const int64_t n = buf.extent(0) / size_;
  const double t0 = MPI_Wtime();
  if (size_ > 1 && n > 0) {
    Kokkos::fence();
    if (nccl_) {
      nccl_->allgather(buf.data(), n, sizeof(T) == sizeof(double));
    } else {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host.data(), int(n), mpi_type<T>(), comm_);
      Kokkos::deep_copy(buf, host);
    }
  }
  count("allgather", n * int64_t(sizeof(T)), wire_factor(Collective::AllGather, size_), MPI_Wtime() - t0);
}

#define STRATA_COMM_INSTANTIATE(T)                                              \
  template Comm::Request Comm::start_broadcast<T>(T*, int64_t, int);            \
  template Comm::Request Comm::start_reduce_sum<T>(const T*, T*, int64_t, int); \
  template Comm::Request Comm::start_allgather_in_place<T>(T*, int64_t);        \
  template Comm::Request Comm::start_reduce_scatter_in_place<T>(T*, int64_t);   \
  template Comm::Request Comm::start_allreduce_in_place<T>(T*, int64_t);        \
  template Comm::Request Comm::start_allgather_blocks<T>(V1<T>);                \
  template Comm::Request Comm::start_reduce_scatter_blocks<T>(V1<T>);           \
  template void Comm::allgather<T>(V1<const T>, V1<T>);                         \
  template void Comm::reduce_scatter_sum<T>(V1<const T>, V1<T>);                \
  template void Comm::reduce_scatter_blocks<T>(V1<T>);                          \
  template void Comm::allgather_blocks<T>(V1<T>);                               \
  template Comm::Request Comm::start_send<T>(const T*, int64_t, int, int);      \
  template Comm::Request Comm::start_recv<T>(T*, int64_t, int, int);            \
  template void Comm::alltoall<T>(V1<const T>, V1<T>);                          \
  template void Comm::alltoallv<T>(V1<const T>, const std::vector<int64_t>&, V1<T>, const std::vector<int64_t>&);
STRATA_COMM_INSTANTIATE(float)
STRATA_COMM_INSTANTIATE(double)
#undef STRATA_COMM_INSTANTIATE

void Comm::barrier() {
  const double t0 = MPI_Wtime();
  if (size_ > 1) MPI_Barrier(comm_);
  count("barrier", 0, 0, MPI_Wtime() - t0);
}

}  // namespace strata
