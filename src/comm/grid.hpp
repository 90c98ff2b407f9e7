#pragma once
// Grid: the run's parallel state. The 5D rank layout data x pipeline x context x
// tensor_rows x tensor_cols, built once from the deck and a parent communicator, and the
// owner of every communicator the run uses (as Megatron's parallel state is): it is the
// only place that splits or duplicates one. Ranks are numbered tensor-fastest,
//   rank = (((d * P + p) * X + x) * R + r) * C + c,
// so a tensor group (the most communication-hungry) sits on consecutive ranks and a
// context group (keys and values of every layer, forward and backward) next to it; the
// pipeline (one activation per micro-batch and stage) and the data group (one gradient sum
// per step) are farther apart. With parallel.placement = "nodes" (the default) the ranks
// are numbered in node order (comm/node_map.hpp) before that, so consecutive ranks share a
// node whatever order the launcher gave them (srun -m cyclic, mpirun --map-by node): the
// tensor and context groups stay inside a node as long as they fit in one, and the data
// and pipeline groups are the ones that cross the network. "launcher" keeps the launcher's
// order. world() and everything split from it use the grid's numbering; its rank 0 is the
// launcher's rank 0 either way.
#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "core/deck.hpp"

namespace strata {

class AcrossCodec;

struct GridCoords {
  int data = 0, pipeline = 0, row = 0, col = 0, context = 0;
  int x = 0, y = 0, depth = 0;  // 3D: col = (depth * tensor_y + y) * tensor_x + x (row 0)
  int expert = 0;  // the expert rank: data % parallel.expert (times tensor_cols, plus col, under a 1D or 3D split)
};

class Grid {
 public:
  // Throws UserError when data x pipeline x context x tensor_rows x tensor_cols is not the
  // size of parent (before any communication, so every rank throws alike). The replica
  // group's vector sums use cfg.comm_backend (NCCL sets up collectively here).
  Grid(const Layout& cfg, MPI_Comm parent);
  ~Grid();
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  const GridCoords& coords() const { return coords_; }
  const Layout& shape() const { return shape_; }
  // The world rank of the grid point (d, p, x, r, c).
  int rank_of(const GridCoords& g) const;

  MPI_Comm world() const { return world_; }      // a duplicate of the parent
  Comm& everyone() const { return *everyone_; }  // over world(): run-wide sums
  // Same (p, r, c): the ranks that hold the same parameters, data x context of them (in
  // the order (d, x)), over which gradients are summed and ZeRO-1 shards the moments.
  Comm& replicas() const { return *replicas_; }
  // Expert parallelism (parallel.expert = e): data rank d is expert rank d % e.
  // experts(): same (d / e, p, x, r, c), the e ranks a mixture layer's tokens are exchanged
  // among, in expert-rank order; with a 1D (or 3D) tensor split of t ranks the tensor ranks are
  // expert ranks too (each routes its share of the rows): same (d / e, p, x), e t ranks,
  // expert rank (d % e) t + c. expert_replicas(): same (d % e, p, r, c), the ranks that
  // hold the same experts (in the order (d / e, x)), over which their gradients are
  // summed. With e t = 1 these are one rank and replicas().
  Comm& experts() const { return *experts_; }
  // The e ranks of experts() at this tensor rank (the data group's part of the expert
  // split; experts() itself without a tensor split): the gradient norm's expert squares.
  Comm& expert_data_ranks() const { return *expert_data_; }
  Comm& expert_replicas() const { return *expert_replicas_; }
  Comm& context() const { return *context_; }    // same (d, p, r, c): a sequence's ring, in order
  Comm& pipeline() const { return *pipeline_; }  // same (d, x, r, c): the stages (or layer blocks), in order
  // The same ranks in reverse order: the time of the layer-parallel adjoint solve.
  Comm& pipeline_reversed() const { return *pipeline_reversed_; }
  Comm& tensor() const { return *tensor_; }   // same (d, p, x): the whole tensor grid
  Comm& tensor_row() const { return *row_; }  // same (d, p, x, r): along a grid row
  Comm& tensor_col() const { return *col_; }  // same (d, p, x, c): along a grid column
  // 3D (tensor_mode = "3d"; null otherwise): the tensor grid's X, Y and depth groups, each
  // in the order of its own coordinate.
  Comm* tensor_x() const { return x_.get(); }
  Comm* tensor_y() const { return y_.get(); }
  Comm* tensor_depth() const { return depth_.get(); }
  Comm& model() const { return *model_; }  // same (d, x): one model replica (pipeline x tensor)
  // The ranks of a pipeline stage whose passes talk to each other, and so must run them in
  // the same order (parallel.dispatch = "ready" agrees on each pick over it): same
  // (d / e, p), its context, tensor and expert ranks, or with ZeRO-2 or 3 (the replicas'
  // unit sums and gathers inside the passes) same p, the whole stage.
  Comm& stage_peers() const { return *stage_peers_; }
  // The first and the last pipeline stage of the same (d, x, r, c), which hold the two copies
  // of the tied embedding; null on the other stages and without a pipeline.
  Comm* embedding() const { return embedding_.get(); }
  // A duplicate of world() for agreements posted while other traffic is in flight (XPipe's
  // stop flags): its messages cannot match anyone else's.
  MPI_Comm control() const { return control_; }
  // Neighbouring stages' world ranks, or -1 at the ends of the pipeline.

  // The data replica: which share of the global batch this rank's sequences are.
  int data_rank() const { return coords_.data; }
  int data_size() const { return int(shape_.data); }

  // The groups the run's layout communicates over, whose traffic a run reports, by the
  // names the summary gives them: "data" (the replicas), and where the layout has them
  // "pipeline", "tied_emb", "context", "tensor", "grid_row", "grid_col", "expert", "expert_data";
  // with parallel.grad_sum = "nodes" "data_node" (the replicas on a node) and "data_across"
  // (those at the same place on every node), through which the replicas' sums go.
  std::vector<std::pair<std::string, const Comm*>> reported_comms() const;
  // Where the ranks run: "node1 (ranks 0-1), node2 (ranks 2-3)" in the grid's numbering;
  // whether that numbering differs from the launcher's; and the reported groups (by name)
  // that span more than one node, and those that stay inside one.
  const std::string& nodes_line() const { return nodes_line_; }
  int nodes() const { return nodes_; }
  // parallel.grad_compression's codec of the replicas' sums across nodes (nullptr: none),
  // whose state the checkpoint carries; and the description of where that state is valid
  // (the codec, the layout, the ranks and the replicas a node): a restart restores the
  // state only where the description is the same.
  AcrossCodec* across_codec() const { return codec_.get(); }
  std::string across_codec_place(const std::string& layout) const;
  bool reordered() const { return reordered_; }
  const std::vector<std::string>& groups_across_nodes() const { return across_; }
  const std::vector<std::string>& groups_within_nodes() const { return within_; }

  // Attaches a timeline to the reported communicators (nullptr detaches): their
  // non-blocking transfers and waits become events (Comm::set_trace).
  void set_trace(TraceRecorder* trace) const;

 private:
  Layout shape_;
  GridCoords coords_;
  MPI_Comm world_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> owned_;                                    // every communicator split here, freed at the end
  std::vector<std::pair<std::string, Comm*>> named_comms() const;  // reported_comms, writable
  std::unique_ptr<Comm> everyone_, replicas_, replicas_node_, replicas_across_, experts_, expert_data_,
      expert_replicas_, context_, pipeline_, pipeline_reversed_, tensor_, row_, col_, x_, y_, depth_, model_,
      stage_peers_, embedding_;
  std::unique_ptr<AcrossCodec> codec_;  // parallel.grad_compression's (comm/across_codec.hpp)
  int rows_ = 1, cols_ = 1;  // the tensor grid as rows x cols (3D: 1 x its size)
  int world_rank_ = 0, world_size_ = 1;
  std::string nodes_line_;
  int nodes_ = 1;
  bool reordered_ = false;
  std::vector<std::string> across_, within_;
  void find_node_spans(const std::vector<int>& node_of_grid_rank);
  void sum_replicas_by_node(int node);
};

}  // namespace strata
