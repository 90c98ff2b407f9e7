#include "optim/optimizer_step.hpp"

#include <cmath>

#include "optim/grad_clip.hpp"
#include "optim/zero_sharding.hpp"

namespace strata {

template <class T>
StepOutcome OptimizerStep<T>::update(ParamStore<T>& store, int64_t step, double loss, Comm* norm_group, Comm* zero,
                                     int frozen) {
  StepOutcome out;
  out.loss = loss;
  out.grad_norm = global_grad_norm<T>(store, norm_group, zero, zero ? nullptr : expert_group_);
  out.applied = std::isfinite(loss) && std::isfinite(out.grad_norm);
  // clipped as AdamW reads the gradients (the same products as scaling them first, no pass of its own)
  if (out.applied) adamw_.step(store, lr(step), frozen, grad_clip_scale<T>(out.grad_norm, cfg_.grad_clip));
  if (out.applied && zero) gather_updated_params(*zero, expert_replicas_ ? *expert_replicas_ : *zero, store);
  return out;
}

template class OptimizerStep<float>;
template class OptimizerStep<double>;

}  // namespace strata
