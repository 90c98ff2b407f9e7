#pragma once
// Grid: the rank layout of a run, built once from the deck and a parent communicator.
// It is the only place that splits communicators. Today's layout is data-parallel only
// (every rank a replica); the tensor and pipeline dimensions of DESIGN.md's 4D grid come
// with the issues that introduce them.
#include <mpi.h>

#include "core/deck.hpp"

namespace strata {

class Grid {
 public:
  // Throws UserError when the deck's layout does not match the communicator's size.
  Grid(const ParallelConfig& cfg, MPI_Comm parent);
  ~Grid();
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int data_rank() const { return data_rank_; }
  int data_size() const { return data_size_; }
  MPI_Comm world() const { return world_; }
  MPI_Comm data_group() const { return data_; }

 private:
  MPI_Comm world_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL;
  int world_rank_ = 0, world_size_ = 1, data_rank_ = 0, data_size_ = 1;
};

}  // namespace strata
