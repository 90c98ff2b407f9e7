// NodeMap's node order and its description, on placements no single machine gives: ranks
// dealt to two nodes in turn (srun -m cyclic), and nodes of unequal size.
#include <catch2/catch.hpp>

#include "comm/node_map.hpp"

using strata::NodeMap;

TEST_CASE("NodeMap puts ranks dealt in turn back in node order", "[node_map]") {
  NodeMap m;
  m.node_of = {0, 1, 0, 1};  // cyclic: ranks 0 and 2 on node1, 1 and 3 on node2
  m.names = {"node1", "node2"};
  const std::vector<int> order = m.by_node();
  CHECK(order == std::vector<int>{0, 2, 1, 3});
  CHECK(m.describe(order) == "node1 (ranks 0-1), node2 (ranks 2-3)");
  CHECK(m.describe({0, 1, 2, 3}) == "node1 (ranks 0,2), node2 (ranks 1,3)");  // the launcher's numbering
}

TEST_CASE("NodeMap keeps a block placement and names single ranks", "[node_map]") {
  NodeMap m;
  m.node_of = {0, 0, 0, 1};
  m.names = {"a", "b"};
  const std::vector<int> order = m.by_node();
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  CHECK(m.describe(order) == "a (ranks 0-2), b (rank 3)");
}
