#pragma once
// AdamW (decoupled weight decay, Loshchilov & Hutter), bias-corrected, as PyTorch's
// torch.optim.AdamW: p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p).
#include "core/kmath.hpp"
#include "core/tensor.hpp"
#include "kernels/elementwise.hpp"

namespace strata::kernels {

struct AdamWHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;  // 1-based count of updates including this one
  // the gradient is read as grad * grad_scale: the clipping's factor (optim/grad_clip.hpp)
  // folded into the update, the same product as scaling the gradient first
  double grad_scale = 1.0;
};

// Updates param, m, v in place from grad, elementwise over n values.
template <class T>
void adamw_update(V1<T> param, V1<T> m, V1<T> v, V1<const T> grad, const AdamWHyper& h) {
  const T b1 = T(h.beta1), b2 = T(h.beta2), eps = T(h.eps), lr = T(h.lr), wd = T(h.weight_decay);
  const T c1 = T(1) / T(1 - std::pow(h.beta1, double(h.step)));
  const T c2 = T(1) / T(1 - std::pow(h.beta2, double(h.step)));
  const T gs = T(h.grad_scale);
  for_each_element(
      "adamw_update", param.extent(0), KOKKOS_LAMBDA(const int64_t i) {
        const T g = grad(i) * gs;
        const T mi = b1 * m(i) + (T(1) - b1) * g;
        const T vi = b2 * v(i) + (T(1) - b2) * g * g;
        m(i) = mi;
        v(i) = vi;
        const T p = param(i);
        param(i) = p - lr * ((mi * c1) / (kmath::sqrt(vi * c2) + eps) + wd * p);
      });
}

// XPipe's weight prediction: param -= steps * lr * m_hat / (sqrt(v_hat) + eps), with the
// moments' bias correction of `h.step` updates taken so far (h.lr is the learning rate of
// the updates to come). Weight decay is not predicted. Nothing to do before the first
// update (no moments yet).
template <class T>
void adam_predict(V1<T> param, V1<const T> m, V1<const T> v, int steps, const AdamWHyper& h) {
  if (h.step < 1 || steps == 0) return;
  const T eps = T(h.eps), scale = T(double(steps) * h.lr);
  const T c1 = T(1) / T(1 - std::pow(h.beta1, double(h.step)));
  const T c2 = T(1) / T(1 - std::pow(h.beta2, double(h.step)));
  for_each_element(
      "adam_predict", param.extent(0),
      KOKKOS_LAMBDA(const int64_t i) { param(i) -= scale * (m(i) * c1) / (kmath::sqrt(v(i) * c2) + eps); });
}

}  // namespace strata::kernels
