#pragma once
// Named wall-clock timers accumulated over a run (ExaMiniMD style): a summary at the end
// says where the time went. Device work is fenced before a timer stops so that
// asynchronous kernels are charged to the phase that launched them. With a trace recorder
// attached, every stopped timer is also an event on this rank's timeline.
#include <Kokkos_Core.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/trace.hpp"

namespace strata {

class Timers {
 public:
  struct Entry {
    double seconds = 0;
    int64_t calls = 0;
  };

  void start(const std::string& name) { open_[name] = now(); }
  // label: the event's name on the timeline (default: the timer's name, its category).
  double stop(const std::string& name, const std::string& label = "") {
    Kokkos::fence();
    const double t0 = open_.at(name), t1 = now(), dt = t1 - t0;
    auto& e = entries_[name];
    e.seconds += dt;
    e.calls += 1;
    if (trace_) trace_->add(label.empty() ? name : label, name, t0, t1);
    return dt;
  }
  void set_trace(TraceRecorder* trace) { trace_ = trace; }
  TraceRecorder* trace() const { return trace_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  std::map<std::string, double> open_;
  std::map<std::string, Entry> entries_;
  TraceRecorder* trace_ = nullptr;
};

// RAII scope for one timer.
class ScopedTimer {
 public:
  ScopedTimer(Timers& t, std::string name) : t_(t), name_(std::move(name)) { t_.start(name_); }
  ~ScopedTimer() { t_.stop(name_); }

 private:
  Timers& t_;
  std::string name_;
};

}  // namespace strata
