#pragma once
// AdamW over a parameter store: one update per tensor (weight decay only where the
// tensor asks for it), moments in the store's flat buffers.
#include "core/deck.hpp"
#include "kernels/adamw.hpp"
#include "state/param_store.hpp"

namespace strata {

template <class T>
class AdamW {
 public:
  explicit AdamW(const OptimConfig& cfg) : cfg_(cfg) {}
  // One update with learning rate lr from the store's (already reduced) grads, read as
  // grad * grad_scale (the clipping's factor, optim/grad_clip.hpp).
  // skip: a parameter (by index) left alone, as another rank updates it (XPipe's copy of
  // the tied embedding on the last stage); -1 for none.
  void step(ParamStore<T>& store, double lr, int skip = -1, T grad_scale = T(1));
  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t n) { step_ = n; }  // on restart from a checkpoint

 private:
  OptimConfig cfg_;
  int64_t step_ = 0;
};

// The kernel's hyper-parameters from the deck, for updates of learning rate lr, `step`
// being the 1-based count of updates (the moments' bias correction).
kernels::AdamWHyper adamw_hyper(const OptimConfig& cfg, double lr, int64_t step);

// Learning rate at (0-based) step: linear warmup to lr, then cosine decay to min_lr at
// the last step.
double lr_at_step(const OptimConfig& cfg, int64_t step, int64_t total_steps);

}  // namespace strata
