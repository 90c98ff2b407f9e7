#include "train/training_job.hpp"

#include <cmath>

#include "optim/grad_clip.hpp"

namespace strata {

StepOutcome clip_and_update(double loss, ParamStore<float>& params, Comm* model_group, AdamW<float>& optim,
                            double grad_clip, double lr) {
  StepOutcome out;
  out.loss = loss;
  out.grad_norm = clip_grad_norm<float>(params, model_group, grad_clip);
  out.applied = std::isfinite(loss) && std::isfinite(out.grad_norm);
  if (out.applied) optim.step(params, lr);
  return out;
}

}  // namespace strata
