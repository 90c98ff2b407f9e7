#include "comm/nccl_comm.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"

#if defined(STRATA_HAVE_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>
#include <Kokkos_Core.hpp>
#endif

namespace strata {

#if defined(STRATA_HAVE_NCCL)

namespace {
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}
}  // namespace

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0;
};

NcclComm::NcclComm(MPI_Comm comm) : impl_(std::make_unique<Impl>()) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id;
  if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
  check(ncclCommInitRank(&impl_->comm, size, id, rank), "ncclCommInitRank");
  impl_->rank = rank;
}

NcclComm::~NcclComm() {
  if (impl_ && impl_->comm) ncclCommDestroy(impl_->comm);
}

void NcclComm::allreduce_sum(void* device_buf, int64_t n, bool is_double, bool wait) {
  cudaStream_t stream = Kokkos::Cuda().cuda_stream();
  check(ncclAllReduce(device_buf, device_buf, size_t(n), is_double ? ncclDouble : ncclFloat, ncclSum, impl_->comm,
                      stream),
        "ncclAllReduce");
  if (wait) synchronize();
}

void NcclComm::reduce_scatter_sum(void* device_buf, int64_t n, bool is_double, bool wait) {
  const size_t value = is_double ? sizeof(double) : sizeof(float);
  void* mine = static_cast<char*>(device_buf) + size_t(impl_->rank) * size_t(n) * value;  // NCCL's in-place form
  check(ncclReduceScatter(device_buf, mine, size_t(n), is_double ? ncclDouble : ncclFloat, ncclSum, impl_->comm,
                          Kokkos::Cuda().cuda_stream()),
        "ncclReduceScatter");
  if (wait) synchronize();
}

void NcclComm::allgather(void* device_buf, int64_t n, bool is_double, bool wait) {
  const size_t value = is_double ? sizeof(double) : sizeof(float);
  const void* mine = static_cast<char*>(device_buf) + size_t(impl_->rank) * size_t(n) * value;
  check(ncclAllGather(mine, device_buf, size_t(n), is_double ? ncclDouble : ncclFloat, impl_->comm,
                      Kokkos::Cuda().cuda_stream()),
        "ncclAllGather");
  if (wait) synchronize();
}

void NcclComm::alltoallv(const void* device_send, const int64_t* send_counts, void* device_recv,
                         const int64_t* recv_counts, bool is_double) {
  const size_t value = is_double ? sizeof(double) : sizeof(float);
  const ncclDataType_t type = is_double ? ncclDouble : ncclFloat;
  int size = 1;
  check(ncclCommCount(impl_->comm, &size), "ncclCommCount");
  cudaStream_t stream = Kokkos::Cuda().cuda_stream();
  size_t s_at = 0, r_at = 0;
  check(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size; ++peer) {
    if (send_counts[peer] > 0)
      check(ncclSend(static_cast<const char*>(device_send) + s_at * value, size_t(send_counts[peer]), type, peer,
                     impl_->comm, stream),
            "ncclSend");
    if (recv_counts[peer] > 0)
      check(ncclRecv(static_cast<char*>(device_recv) + r_at * value, size_t(recv_counts[peer]), type, peer, impl_->comm,
                     stream),
            "ncclRecv");
    s_at += size_t(send_counts[peer]);
    r_at += size_t(recv_counts[peer]);
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  synchronize();
}

void NcclComm::synchronize() {
  if (cudaStreamSynchronize(Kokkos::Cuda().cuda_stream()) != cudaSuccess)
    throw std::runtime_error("cudaStreamSynchronize after ncclAllReduce");
}

bool nccl_available() { return true; }

#else

struct NcclComm::Impl {};
NcclComm::NcclComm(MPI_Comm) {
  throw UserError("parallel.comm_backend = \"nccl\" needs a CUDA build of strata (this one has no NCCL)");
}
NcclComm::~NcclComm() = default;
void NcclComm::allreduce_sum(void*, int64_t, bool, bool) {}
void NcclComm::reduce_scatter_sum(void*, int64_t, bool, bool) {}
void NcclComm::allgather(void*, int64_t, bool, bool) {}
void NcclComm::alltoallv(const void*, const int64_t*, void*, const int64_t*, bool) {}
void NcclComm::synchronize() {}
bool nccl_available() { return false; }

#endif

}  // namespace strata
