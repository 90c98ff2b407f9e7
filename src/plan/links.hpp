#pragma once
// Which links a communicator group of a layout crosses, and what its traffic costs there.
#include <string>

#include "comm/traffic.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"

namespace strata {

// Which links a communicator group crosses: ranks are numbered tensor-fastest, then
// context, pipeline, data (comm/grid.hpp), so a group stays in a node while the ranks it
// spans (from its first to its last) are no more than a node has.
class Links {
 public:
  Links(const Layout& l, const MachineFile& m) : l_(l), m_(m) {}
  const LinkCosts& of(const std::string& group) const {
    return crosses_nodes(group) && m_.has_inter_node ? m_.inter_node : m_.intra_node;
  }
  // whether a group of this kind spans more than one node
  bool crosses_nodes(const std::string& group) const {
    const int64_t ts = l_.tensor_size(), x = l_.context, p = l_.pipeline, d = l_.data;
    int64_t span = 1;
    if (group == "tensor")
      span = ts;
    else if (group == "grid_row")
      span = l_.tensor_rows;
    else if (group == "grid_col")
      span = l_.tensor_rows * (l_.tensor_rows - 1) + 1;
    else if (group == "tensor_x")  // 3D: x fastest, then y, then depth (comm/grid.cpp)
      span = l_.tensor_x;
    else if (group == "tensor_y")
      span = l_.tensor_x * (l_.tensor_y - 1) + 1;
    else if (group == "tensor_depth")
      span = l_.tensor_x * l_.tensor_y * (l_.tensor_depth - 1) + 1;
    else if (group == "context")
      span = ts * (x - 1) + 1;
    else if (group == "pipeline" || group == "tied_emb")
      span = ts * x * (p - 1) + 1;
    else if (group == "data" || group == "expert_data")
      span = ts * x * p * (d - 1) + ts * (x - 1) + 1;  // data x context
    else if (group == "expert")
      span = ts * x * p * (l_.expert - 1) + ts;  // consecutive data ranks (and their tensor ranks)
    return span > m_.ranks_per_node;
  }
  // seconds of the entries `which` selects (by group and kind)
  template <class Which>
  double seconds(const Traffic& t, Which which) const {
    double s = 0;
    for (const auto& [key, e] : t.entries()) {
      if (!which(key.first, key.second) || e.calls == 0 || key.second == "recv") continue;
      s += double(e.calls) * of(key.first).seconds(e.collective, e.ranks, double(e.payload_bytes) / double(e.calls));
    }
    return s;
  }

 private:
  const Layout& l_;
  const MachineFile& m_;
};

}  // namespace strata
