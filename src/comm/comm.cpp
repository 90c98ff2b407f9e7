#include "comm/comm.hpp"

#include "core/error.hpp"

namespace strata {

CommBackend parse_comm_backend(const std::string& name) {
  if (name == "mpi") return CommBackend::Mpi;
  if (name == "nccl") return CommBackend::Nccl;
  throw UserError("unknown communication backend \"" + name + "\" (mpi or nccl)");
}

Comm::Comm(MPI_Comm comm, CommBackend backend) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (backend == CommBackend::Nccl) nccl_ = std::make_unique<NcclComm>(comm_);
}

Comm::~Comm() = default;

void Comm::count(const char* kind, int64_t bytes, double seconds) {
  auto& s = stats_[kind];
  s.calls += 1;
  s.bytes += bytes;
  s.seconds += seconds;
}

template <class T>
void Comm::allreduce_sum_impl(V1<T> buf, MPI_Datatype type) {
  const int64_t n = buf.extent(0);
  const double t0 = MPI_Wtime();
  if (size_ > 1 && n > 0) {
    Kokkos::fence();  // the producer kernels must be done before the buffer is read
    if (nccl_) {
      nccl_->allreduce_sum(buf.data(), n, sizeof(T) == sizeof(double));
    } else if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), type, MPI_SUM, comm_);
    } else {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buf);
      MPI_Allreduce(MPI_IN_PLACE, host.data(), int(n), type, MPI_SUM, comm_);
      Kokkos::deep_copy(buf, host);
    }
  }
  count("allreduce", size_ > 1 ? n * int64_t(sizeof(T)) : 0, MPI_Wtime() - t0);
}

void Comm::allreduce_sum(V1<float> buf) { allreduce_sum_impl(buf, MPI_FLOAT); }
void Comm::allreduce_sum(V1<double> buf) { allreduce_sum_impl(buf, MPI_DOUBLE); }

double Comm::allreduce_scalar(double x, MPI_Op op, const char* kind) {
  const double t0 = MPI_Wtime();
  double out = x;
  if (size_ > 1) MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, op, comm_);
  count(kind, size_ > 1 ? int64_t(sizeof(double)) : 0, MPI_Wtime() - t0);
  return out;
}
double Comm::allreduce_sum(double x) { return allreduce_scalar(x, MPI_SUM, "allreduce_scalar"); }
double Comm::allreduce_max(double x) { return allreduce_scalar(x, MPI_MAX, "allreduce_scalar"); }
double Comm::allreduce_min(double x) { return allreduce_scalar(x, MPI_MIN, "allreduce_scalar"); }

void Comm::broadcast(void* data, int64_t bytes, int root) {
  const double t0 = MPI_Wtime();
  if (size_ > 1) MPI_Bcast(data, int(bytes), MPI_BYTE, root, comm_);
  count("broadcast", size_ > 1 ? bytes : 0, MPI_Wtime() - t0);
}

void Comm::barrier() {
  const double t0 = MPI_Wtime();
  if (size_ > 1) MPI_Barrier(comm_);
  count("barrier", 0, MPI_Wtime() - t0);
}

}  // namespace strata
