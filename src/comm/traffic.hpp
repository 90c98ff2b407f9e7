#pragma once
// Traffic: the communication one rank makes, call for call, in the terms Comm counts it
// (CommStats): per communicator group and counter kind, the calls and the payload bytes.
// The operators, blocks and drivers that communicate each say what they send in a
// *_traffic function beside their implementation; the planner adds those up instead of
// modelling the network a second time, and tests check the sums against Comm's counters.
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "comm/wire_model.hpp"

namespace strata {

struct TrafficEntry {
  Collective collective = Collective::Send;
  int ranks = 1;  // the group's size
  int64_t calls = 0;
  int64_t payload_bytes = 0;  // summed over calls; 0 in a group of one rank, as Comm counts it
  double wire_bytes() const { return double(payload_bytes) * wire_factor(collective, ranks); }
};

class Traffic {
 public:
  // group: the communicator's name as the trainer reports it ("data", "pipeline",
  // "tied_emb", "tensor", "grid_row", "grid_col"); kind: Comm's counter ("allreduce",
  // "broadcast", "send", ...). calls calls of payload_bytes each.
  void add(const std::string& group, const std::string& kind, Collective c, int ranks, int64_t payload_bytes,
           int64_t calls = 1) {
    auto& e = entries_[{group, kind}];
    e.collective = c;
    e.ranks = ranks;
    e.calls += calls;
    if (ranks > 1) e.payload_bytes += payload_bytes * calls;
  }
  void add(const Traffic& other, int64_t times = 1) {
    for (const auto& [key, e] : other.entries_) {
      auto& mine = entries_[key];
      mine.collective = e.collective;
      mine.ranks = e.ranks;
      mine.calls += e.calls * times;
      mine.payload_bytes += e.payload_bytes * times;
    }
  }
  const std::map<std::pair<std::string, std::string>, TrafficEntry>& entries() const { return entries_; }
  double wire_bytes() const {
    double w = 0;
    for (const auto& [key, e] : entries_) w += e.wire_bytes();
    return w;
  }

 private:
  std::map<std::pair<std::string, std::string>, TrafficEntry> entries_;
};

}  // namespace strata
