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
  out.grad_norm = clip_grad_norm<T>(store, norm_group, cfg_.grad_clip, zero, zero ? nullptr : expert_group_);
  out.applied = std::isfinite(loss) && std::isfinite(out.grad_norm);
  if (out.applied) adamw_.step(store, lr(step), frozen);
  if (out.applied && zero) gather_updated_params(*zero, expert_replicas_ ? *expert_replicas_ : *zero, store);
  return out;
}

template class OptimizerStep<float>;
template class OptimizerStep<double>;

}  // namespace strata
