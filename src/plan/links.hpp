#pragma once
// Which links a communicator group of a layout crosses, and what its traffic costs there.
#include <string>

#include "comm/traffic.hpp"
#include "optim/zero_sharding.hpp"
#include "plan/layout.hpp"
#include "plan/machine_file.hpp"

namespace strata {

// Whether the layout's replicas sum node by node (the Grid routes them so where there are two or more).
inline bool sums_by_node(const Layout& l) { return l.grad_sum == GradSum::Nodes && l.replicas() > 1; }

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
    else if (group == "data_node")
      return false;
    else if (group == "data" || group == "data_across" || group == "expert_data")
      span = ts * x * p * (d - 1) + ts * (x - 1) + 1;  // data x context
    else if (group == "expert")
      span = ts * x * p * (l_.expert - 1) + ts;  // consecutive data ranks (and their tensor ranks)
    return span > m_.ranks_per_node;
  }
  // The data replicas on one node (parallel.grad_sum = "nodes" sums over them first): those
  // of the first node's replica group (ranks ((d p) x + x') t) among its ranks_per_node.
  int replicas_per_node() const {
    const int64_t stride = l_.tensor_size(), per_replica = l_.pipeline * l_.context * stride;
    int count = 0;
    for (int64_t d = 0; d < l_.data; ++d)
      for (int64_t x = 0; x < l_.context; ++x) count += d * per_replica + x * stride < m_.ranks_per_node ? 1 : 0;
    return count;
  }
  // Seconds one rank's codec (parallel.grad_compression) takes on its block of a sum of
  // `values` values node by node, at the machine's measured rate (PowerSGD's grows with its
  // rank r from r = 4's); 0 without a codec, or where the machine file has no rate for it
  // (codec_rate_known says which).
  double codec_seconds(int64_t values) const {
    const NodeSum how = node_sum();
    if (how.per_node <= 0 || !codec_rate_known()) return 0;
    const double block = double(values / how.per_node);
    return how.codec == GradCompression::Int8 ? block / m_.int8_rate : block * how.rank / 4.0 / m_.powersgd_rate;
  }
  bool codec_rate_known() const {
    return (l_.grad_compression == GradCompression::Int8 && m_.int8_rate > 0) ||
           (l_.grad_compression == GradCompression::PowerSgd && m_.powersgd_rate > 0);
  }
  // how the layout's replicas sum (flat where they do not sum node by node)
  NodeSum node_sum() const {
    if (!sums_by_node(l_)) return {};
    return {replicas_per_node(), l_.grad_compression, int(l_.powersgd_rank)};
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
