#pragma once
// NCCL communicator over the ranks of an MPI communicator (built when CUDA is on). Used
// by Comm for sums of device buffers and the experts' all-to-alls; the NCCL unique id
// travels by MPI_Bcast.
#include <mpi.h>

#include <cstdint>
#include <memory>

namespace strata {

class NcclComm {
 public:
  explicit NcclComm(MPI_Comm comm);  // collective over comm
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  // In-place sum of n device values of type float (is_double = false) or double, queued
  // on Kokkos' CUDA stream; with wait, returns when the result is in place.
  void allreduce_sum(void* device_buf, int64_t n, bool is_double, bool wait = true);
  // In place on size() blocks of n values (see Comm::reduce_scatter_blocks and
  // allgather_blocks), queued on Kokkos' CUDA stream; with wait, they return when the
  // result is in place.
  void reduce_scatter_sum(void* device_buf, int64_t n, bool is_double, bool wait = true);
  void allgather(void* device_buf, int64_t n, bool is_double, bool wait = true);
  // Blocks of any size to and from every rank (Comm::alltoallv), by grouped sends and
  // receives; counts in values, blocks back to back; returns when the blocks are in place.
  void alltoallv(const void* device_send, const int64_t* send_counts, void* device_recv, const int64_t* recv_counts,
                 bool is_double);
  void synchronize();  // waits for every queued sum

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether this build has NCCL (CUDA builds do).
bool nccl_available();

}  // namespace strata
