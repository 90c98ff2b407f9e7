#pragma once
// Injected variability ([variability], core/deck.hpp): each pass on the chosen stages is
// slowed by a drawn share of its own time. The share is a pure function of the seed, the
// step, the stage, the micro-batch, the chunk and the kind of pass, so the "order" and
// "ready" runs of a schedule meet the same slowdowns in whatever order they run the
// passes, and the simulator (simulate_ready) draws the same ones on paper.
#include <chrono>
#include <cstdint>
#include <thread>

#include "core/deck.hpp"
#include "core/rng.hpp"
#include "engine/pipeline/pipe_program.hpp"

namespace strata {

// The slowdown of one pass as a share of its time (0: none).
inline double slowdown_share(const VariabilityConfig& v, int64_t step, int stage, PipeOp op, int mb, int chunk) {
  if (!v.active() || (v.stage >= 0 && v.stage != stage)) return 0.0;
  const uint64_t stream = (uint64_t(step) << 20) ^ (uint64_t(stage) << 12) ^ uint64_t(op);
  const uint64_t index = (uint64_t(mb) << 8) ^ uint64_t(chunk);
  const double u = counter_uniform(v.seed, stream, index);
  if (v.draw == SlowdownDraw::Spikes) return u < v.spike_chance ? v.slowdown_max : 0.0;
  return v.slowdown_min + (v.slowdown_max - v.slowdown_min) * u;
}

// What one stage's executor applies: after a pass that took `seconds`, an idle wait of its
// drawn share (as if another process had taken the core; the stage computes nothing).
class PassDelays {
 public:
  PassDelays() = default;
  PassDelays(const VariabilityConfig& v, int stage) : v_(v), stage_(stage) {}
  bool active() const { return v_.active() && (v_.stage < 0 || v_.stage == stage_); }
  void next_step() { ++step_; }
  // Returns the seconds waited.
  double after_pass(PipeOp op, int mb, int chunk, double seconds) const {
    const double wait = seconds * slowdown_share(v_, step_, stage_, op, mb, chunk);
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    return wait;
  }

 private:
  VariabilityConfig v_;
  int stage_ = 0;
  int64_t step_ = -1;  // next_step() before each training list
};

}  // namespace strata
