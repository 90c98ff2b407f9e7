#pragma once
// XPipe's weight prediction (arXiv 1911.04610): an asynchronous pipeline stage runs a pass
// on the weights it expects to hold `s` updates later, predicted with Adam's own moments,
//   W_hat = W - s * lr * m_hat / (sqrt(v_hat) + eps),
// and puts the true weights back afterwards; only the true weights are ever updated. With
// a constant gradient the prediction is exact (m_hat and v_hat stay g and g^2).
#include <stdexcept>
#include <vector>

#include "optim/adamw.hpp"

namespace strata {

struct Lookahead {
  int steps = 0;            // updates to predict
  int64_t steps_taken = 0;  // updates behind the moments (their bias correction)
};

template <class T>
class WeightPredictor {
 public:
  explicit WeightPredictor(const OptimConfig& cfg) : cfg_(cfg) {}

  // Saves the true weights and writes the prediction `all.steps` updates ahead, for
  // updates of learning rate lr. `except`: parameters (by index) whose version differs
  // from the rest of the store (XPipe's copy of the tied embedding), with their own
  // lookahead.
  void predict(ParamStore<T>& store, double lr, Lookahead all,
               const std::vector<std::pair<int, Lookahead>>& except = {}) {
    if (active_) throw std::logic_error("WeightPredictor::predict twice without restore");
    reserve(store);
    Kokkos::deep_copy(saved_, store.params());
    kernels::adam_predict<T>(store.params(), store.zero().adam_m(), store.zero().adam_v(), all.steps,
                             adamw_hyper(cfg_, lr, all.steps_taken));
    for (const auto& [index, ahead] : except) {
      const auto& p = store.infos()[index];
      const auto slice = [&](const Tensor1<T>& buf) { return V1<T>(buf.data() + p.offset, p.numel); };
      Kokkos::deep_copy(slice(store.params()), slice(saved_));
      kernels::adam_predict<T>(slice(store.params()), slice(store.zero().adam_m()), slice(store.zero().adam_v()),
                               ahead.steps, adamw_hyper(cfg_, lr, ahead.steps_taken));
    }
    active_ = true;
  }
  // The true weights, saved while a prediction is in place.
  V1<const T> true_weights() const { return saved_; }
  int64_t bytes() const { return int64_t(saved_.extent(0) * sizeof(T)); }
  // Allocates the copy of the true weights (predict does it on first use).
  void reserve(const ParamStore<T>& store) {
    if (int64_t(saved_.extent(0)) != store.numel()) saved_ = Tensor1<T>("predictor.saved", store.numel());
  }

  // Puts the saved true weights back.
  void restore(ParamStore<T>& store) {
    if (!active_) throw std::logic_error("WeightPredictor::restore without predict");
    Kokkos::deep_copy(store.params(), saved_);
    active_ = false;
  }

 private:
  OptimConfig cfg_;
  Tensor1<T> saved_;
  bool active_ = false;
};

}  // namespace strata
