#pragma once
// Grid: the run's 4D rank layout, data x pipeline x tensor_rows x tensor_cols, built once
// from the deck and a parent communicator. It is the only place that splits
// communicators. Ranks are numbered tensor-fastest,
//   rank = ((d * P + p) * R + r) * C + c,
// so a tensor group (the most communication-hungry) sits on consecutive ranks, i.e. on
// one node when ranks are placed by node.
#include <mpi.h>

#include "core/deck.hpp"

namespace strata {

struct GridCoords {
  int data = 0, pipeline = 0, row = 0, col = 0;
};

class Grid {
 public:
  // Throws UserError when data x pipeline x tensor_rows x tensor_cols is not the size of
  // parent (before any communication, so every rank throws alike).
  Grid(const ParallelConfig& cfg, MPI_Comm parent);
  ~Grid();
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  const GridCoords& coords() const { return coords_; }
  const ParallelConfig& shape() const { return shape_; }
  // The world rank of the grid point (d, p, r, c).
  int rank_of(const GridCoords& g) const;

  MPI_Comm world() const { return world_; }
  MPI_Comm data_group() const { return data_; }        // same (p, r, c): replicas
  MPI_Comm pipeline_group() const { return pipeline_; }// same (d, r, c): the stages, in order
  MPI_Comm tensor_row() const { return row_; }          // same (d, p, r): along a grid row
  MPI_Comm tensor_col() const { return col_; }          // same (d, p, c): along a grid column
  MPI_Comm tensor_group() const { return tensor_; }     // same (d, p): the whole tensor grid
  MPI_Comm model_group() const { return model_; }       // same d: one model replica (pipeline x tensor)
  // The first and the last pipeline stage of the same (d, r, c), which hold the two copies
  // of the tied embedding; MPI_COMM_NULL on the other stages and without a pipeline.
  MPI_Comm embedding_group() const { return embedding_; }
  // Neighbouring stages' world ranks, or -1 at the ends of the pipeline.
  int pipeline_prev() const { return pipeline_prev_; }
  int pipeline_next() const { return pipeline_next_; }

  int data_rank() const { return coords_.data; }
  int data_size() const { return int(shape_.data); }

 private:
  ParallelConfig shape_;
  GridCoords coords_;
  MPI_Comm world_ = MPI_COMM_NULL, data_ = MPI_COMM_NULL, pipeline_ = MPI_COMM_NULL, row_ = MPI_COMM_NULL,
           col_ = MPI_COMM_NULL, tensor_ = MPI_COMM_NULL, model_ = MPI_COMM_NULL, embedding_ = MPI_COMM_NULL;
  int world_rank_ = 0, world_size_ = 1, pipeline_prev_ = -1, pipeline_next_ = -1;
};

}  // namespace strata
