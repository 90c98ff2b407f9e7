#include "comm/node_map.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "comm/control.hpp"
#include "core/error.hpp"

namespace strata {

int simulated_ranks_per_node() {
  const char* text = std::getenv("STRATA_RANKS_PER_NODE");
  if (!text || !*text) return 0;
  char* end = nullptr;
  const long k = std::strtol(text, &end, 10);
  if (*end != '\0' || k < 1 || k > 1 << 20)
    throw UserError("STRATA_RANKS_PER_NODE must be a whole number of ranks of at least 1, not '" + std::string(text) +
                    "'");
  return int(k);
}

MPI_Comm split_by_node(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  if (const int k = simulated_ranks_per_node(); k > 0) {
    int world_rank = 0, rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split(comm, world_rank / k, rank, &node);
  } else {
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  }
  return node;
}

NodeMap node_map(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm node = split_by_node(comm);
  const int first = min_over(node, rank);  // the node's first rank names it
  MPI_Comm_free(&node);
  std::vector<int> firsts(size_t(size), 0);
  MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, comm);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::string own(name, size_t(length));
  if (const int k = simulated_ranks_per_node(); k > 0) {  // a node of STRATA_RANKS_PER_NODE's: "host:2"
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    own += ":" + std::to_string(world_rank / k);
  }
  const std::vector<std::string> names = allgather_strings(comm, own);
  NodeMap m;
  std::map<int, int> number;  // first rank -> node number, in the order of first ranks
  for (int r = 0; r < size; ++r) {
    if (!number.count(firsts[size_t(r)])) {
      number[firsts[size_t(r)]] = m.nodes();
      m.names.push_back(names[size_t(firsts[size_t(r)])]);
    }
    m.node_of.push_back(number[firsts[size_t(r)]]);
  }
  return m;
}

NodeGroups::NodeGroups(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  node_ = split_by_node(comm);
  int local = 0;
  MPI_Comm_rank(node_, &local);
  MPI_Comm_split(comm, local, rank, &across_);
  nodes_ = max_over(comm, [&] {
    int n = 1;
    MPI_Comm_size(across_, &n);
    return n;
  }());
}

NodeGroups::~NodeGroups() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm_free(&node_);
  MPI_Comm_free(&across_);
}

std::vector<int> NodeMap::by_node() const {
  std::vector<int> order(node_of.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = int(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return node_of[size_t(a)] < node_of[size_t(b)]; });
  return order;
}

std::string NodeMap::describe(const std::vector<int>& order) const {
  std::string out;
  for (int n = 0; n < nodes(); ++n) {
    std::string ranks;
    int count = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      if (node_of[size_t(order[i])] != n) continue;
      ++count;
      // runs of consecutive positions as "a-b"
      const bool starts = i == 0 || node_of[size_t(order[i - 1])] != n;
      const bool ends = i + 1 == order.size() || node_of[size_t(order[i + 1])] != n;
      if (starts) ranks += (ranks.empty() ? "" : ",") + std::to_string(i);
      if (ends && !starts) ranks += "-" + std::to_string(i);
    }
    out += (out.empty() ? "" : ", ") + names[size_t(n)] + (count == 1 ? " (rank " : " (ranks ") + ranks + ")";
  }
  return out;
}

}  // namespace strata
