#include "comm/grid.hpp"

#include <string>

#include "core/error.hpp"

namespace strata {

Grid::Grid(const ParallelConfig& cfg, MPI_Comm parent) {
  int size = 1;
  MPI_Comm_size(parent, &size);
  if (cfg.data != size)
    throw UserError("parallel.data = " + std::to_string(cfg.data) + " but the job has " + std::to_string(size) +
                    " ranks: the layout (data) must multiply to the rank count (use mpirun -n " +
                    std::to_string(cfg.data) + " or --set parallel.data=" + std::to_string(size) + ")");
  MPI_Comm_dup(parent, &world_);
  MPI_Comm_rank(world_, &world_rank_);
  world_size_ = size;
  // Every rank is a data-parallel replica: the data group is the whole world.
  MPI_Comm_split(world_, 0, world_rank_, &data_);
  MPI_Comm_rank(data_, &data_rank_);
  MPI_Comm_size(data_, &data_size_);
}

Grid::~Grid() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (data_ != MPI_COMM_NULL) MPI_Comm_free(&data_);
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
}

}  // namespace strata
