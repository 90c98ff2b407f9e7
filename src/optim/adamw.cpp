#include "optim/adamw.hpp"

#include <algorithm>
#include <cmath>

namespace strata {

template <class T>
void AdamW<T>::step(ParamStore<T>& store, double lr, int skip, T grad_scale) {
  ++step_;
  kernels::AdamWHyper h = adamw_hyper(cfg_, lr, step_);
  h.grad_scale = double(grad_scale);
  // the part of each tensor whose moments this rank keeps (all of it without ZeRO-1)
  for (const auto& p : store.infos()) {
    if (&p - store.infos().data() == skip) continue;
    h.weight_decay = p.decay ? cfg_.weight_decay : 0.0;
    for (const auto& part : store.zero().moment_parts(p)) {
      const int64_t n = part.end - part.begin;
      kernels::adamw_update<T>(store.moment_params(part), V1<T>(store.zero().adam_m().data() + part.at, n),
                               V1<T>(store.zero().adam_v().data() + part.at, n), store.moment_grads(part), h);
    }
  }
}

kernels::AdamWHyper adamw_hyper(const OptimConfig& cfg, double lr, int64_t step) {
  kernels::AdamWHyper h;
  h.lr = lr;
  h.beta1 = cfg.beta1;
  h.beta2 = cfg.beta2;
  h.eps = cfg.eps;
  h.step = step;
  return h;
}

double lr_at_step(const OptimConfig& cfg, int64_t step, int64_t total_steps) {
  if (cfg.warmup_steps > 0 && step < cfg.warmup_steps) return cfg.lr * double(step + 1) / double(cfg.warmup_steps);
  const int64_t decay_steps = total_steps - cfg.warmup_steps;
  if (decay_steps <= 1) return cfg.lr;
  const double progress = double(step - cfg.warmup_steps) / double(decay_steps - 1);
  return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
}

template class AdamW<float>;
template class AdamW<double>;

}  // namespace strata
