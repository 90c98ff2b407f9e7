#pragma once
// A timeline of what this rank did: named intervals (forward of micro-batch 3, a wait for
// a message, the optimizer...) kept in memory, written at the end of a run as a
// Chrome/Perfetto trace by io/trace_file.hpp. Meant for short runs: every event is kept
// (about 100 bytes each).
#include <string>
#include <vector>

namespace strata {

struct TraceEvent {
  std::string name;           // shown on the bar, e.g. "F3"
  std::string category;       // what kind of work: "forward", "backward", "comm", "optimizer", ...
  double start = 0, end = 0;  // seconds since the recorder's origin
  int lane = 0;               // 0: what the rank runs; 1: transfers in flight meanwhile
};

class TraceRecorder {
 public:
  // origin: the clock value (Timers::now()) that becomes time 0; ranks take it right after
  // a barrier so their rows line up.
  explicit TraceRecorder(double origin) : origin_(origin) {}
  void add(std::string name, std::string category, double start_clock, double end_clock, int lane = 0) {
    events_.push_back({std::move(name), std::move(category), start_clock - origin_, end_clock - origin_, lane});
  }
  const std::vector<TraceEvent>& events() const { return events_; }

 private:
  double origin_;
  std::vector<TraceEvent> events_;
};

}  // namespace strata
