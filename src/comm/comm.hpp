#pragma once
// Comm: the few collectives strata needs, over one MPI communicator. Each call is
// counted (calls, bytes, seconds) per operation kind so a run can report its
// communication volume. Buffers may live in device memory: where the host cannot read
// that memory the data is staged through an explicit host mirror.
#include <mpi.h>

#include <map>
#include <string>

#include "core/tensor.hpp"

namespace strata {

struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload bytes this rank contributed
  double seconds = 0;
};

class Comm {
 public:
  explicit Comm(MPI_Comm comm);  // does not take ownership
  MPI_Comm raw() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // In-place sum over all ranks of a float or double buffer.
  void allreduce_sum(V1<float> buf);
  void allreduce_sum(V1<double> buf);
  double allreduce_sum(double x);
  double allreduce_max(double x);
  double allreduce_min(double x);
  // Root's bytes to everyone.
  void broadcast(void* data, int64_t bytes, int root);
  void barrier();

  const std::map<std::string, CommStats>& stats() const { return stats_; }

 private:
  template <class T> void allreduce_sum_impl(V1<T> buf, MPI_Datatype type);
  double allreduce_scalar(double x, MPI_Op op, const char* kind);
  void count(const char* kind, int64_t bytes, double seconds);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::map<std::string, CommStats> stats_;
};

}  // namespace strata
