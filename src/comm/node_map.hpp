#pragma once
// Which node each rank of a communicator runs on. A node is the ranks that can share memory
// (MPI_COMM_TYPE_SHARED: the MPI library's own view, which under Slurm, PBS or a plain
// mpirun comes from the launcher's placement), so a rank's node-local index is found the
// same way whatever started the job. Nodes are numbered in the order of their first rank
// and named by that rank's processor name (MPI_Get_processor_name: the host name).
#include <mpi.h>

#include <string>
#include <vector>

namespace strata {

// The ranks of comm on this rank's node, as a new communicator: MPI_COMM_TYPE_SHARED, or
// with STRATA_RANKS_PER_NODE=k every k consecutive ranks of MPI_COMM_WORLD taken for a node
// (node-aware code tried on one machine: the tests' two "nodes" of 2 ranks; a bad value is
// a UserError). Collective over comm.
MPI_Comm split_by_node(MPI_Comm comm);
// k, or 0 where STRATA_RANKS_PER_NODE is not set
int simulated_ranks_per_node();

struct NodeMap {
  std::vector<int> node_of;        // per rank: its node's number
  std::vector<std::string> names;  // per node
  int nodes() const { return int(names.size()); }
  // The ranks in node order: node 0's in rank order, then node 1's, ... (the identity
  // where the launcher placed ranks by node, as Slurm's and MPICH's defaults do).
  std::vector<int> by_node() const;
  // "node1 (ranks 0-1), node2 (ranks 2-3)", the ranks of `order` (position i holds rank
  // order[i]) written as their positions
  std::string describe(const std::vector<int>& order) const;
};

// Collective over comm.
NodeMap node_map(MPI_Comm comm);

// The two link levels of comm's ranks, as communicators it owns: node(), this rank's node
// (in rank order), and across(), the ranks of every node with this rank's node-local index
// (one per node, in node order). Collective over comm.
class NodeGroups {
 public:
  explicit NodeGroups(MPI_Comm comm);
  ~NodeGroups();
  NodeGroups(const NodeGroups&) = delete;
  NodeGroups& operator=(const NodeGroups&) = delete;
  MPI_Comm node() const { return node_; }
  MPI_Comm across() const { return across_; }
  int nodes() const { return nodes_; }

 private:
  MPI_Comm node_ = MPI_COMM_NULL, across_ = MPI_COMM_NULL;
  int nodes_ = 1;
};

}  // namespace strata
