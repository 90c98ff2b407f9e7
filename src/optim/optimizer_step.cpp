#include "optim/optimizer_step.hpp"

#include <cmath>

#include "optim/grad_clip.hpp"

namespace strata {

template <class T>
StepOutcome OptimizerStep<T>::update(ParamStore<T>& store, int64_t step, double loss, Comm* norm_group, int frozen) {
  StepOutcome out;
  out.loss = loss;
  out.grad_norm = clip_grad_norm<T>(store, norm_group, cfg_.grad_clip);
  out.applied = std::isfinite(loss) && std::isfinite(out.grad_norm);
  if (out.applied) adamw_.step(store, lr(step), frozen);
  return out;
}

template class OptimizerStep<float>;
template class OptimizerStep<double>;

}  // namespace strata
