#include "comm/grid.hpp"

#include <string>

#include "core/error.hpp"

namespace strata {

Grid::Grid(const ParallelConfig& cfg, MPI_Comm parent) : shape_(cfg) {
  int size = 1;
  MPI_Comm_size(parent, &size);
  if (cfg.ranks() != size) {
    const std::string layout = std::to_string(cfg.data) + " x " + std::to_string(cfg.pipeline) + " x " +
                               std::to_string(cfg.tensor_rows) + " x " + std::to_string(cfg.tensor_cols);
    throw UserError("parallel layout data x pipeline x tensor_rows x tensor_cols = " + layout + " = " +
                    std::to_string(cfg.ranks()) + " ranks, but the job has " + std::to_string(size) +
                    (cfg.ranks() == cfg.data ? " (use mpirun -n " + std::to_string(cfg.ranks()) +
                                                   " or --set parallel.data=" + std::to_string(size) + ")"
                                             : " (use mpirun -n " + std::to_string(cfg.ranks()) + ")"));
  }
  MPI_Comm_dup(parent, &world_);
  MPI_Comm_rank(world_, &world_rank_);
  world_size_ = size;
  const int C = int(cfg.tensor_cols), R = int(cfg.tensor_rows), P = int(cfg.pipeline);
  coords_.col = world_rank_ % C;
  coords_.row = (world_rank_ / C) % R;
  coords_.pipeline = (world_rank_ / (C * R)) % P;
  coords_.data = world_rank_ / (C * R * P);
  const auto& g = coords_;
  // color = the coordinates the group shares; key = the position along the group's axis
  MPI_Comm_split(world_, (g.pipeline * R + g.row) * C + g.col, g.data, &data_);
  MPI_Comm_split(world_, (g.data * R + g.row) * C + g.col, g.pipeline, &pipeline_);
  MPI_Comm_split(world_, (g.data * P + g.pipeline) * R + g.row, g.col, &row_);
  MPI_Comm_split(world_, (g.data * P + g.pipeline) * C + g.col, g.row, &col_);
  MPI_Comm_split(world_, g.data * P + g.pipeline, g.row * C + g.col, &tensor_);
  MPI_Comm_split(world_, g.data, (g.pipeline * R + g.row) * C + g.col, &model_);
  const bool end_stage = P > 1 && (g.pipeline == 0 || g.pipeline == P - 1);
  MPI_Comm_split(world_, end_stage ? (g.data * R + g.row) * C + g.col : MPI_UNDEFINED, g.pipeline, &embedding_);
  if (g.pipeline > 0) pipeline_prev_ = rank_of({g.data, g.pipeline - 1, g.row, g.col});
  if (g.pipeline + 1 < P) pipeline_next_ = rank_of({g.data, g.pipeline + 1, g.row, g.col});
}

int Grid::rank_of(const GridCoords& g) const {
  return ((g.data * int(shape_.pipeline) + g.pipeline) * int(shape_.tensor_rows) + g.row) * int(shape_.tensor_cols) +
         g.col;
}

Grid::~Grid() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&data_, &pipeline_, &row_, &col_, &tensor_, &model_, &embedding_, &world_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

}  // namespace strata
