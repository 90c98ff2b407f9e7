#pragma once
// The residual network's steps as an OdeNetwork (ode_network.hpp), for layer-parallel
// training: the opening layer reads the batch's images, the closing layer its labels;
// every step is one of the network's, with its own weights. It keeps one work space for
// the steps and the closing layer's logits between its forward and backward.
#include <memory>

#include "kernels/cross_entropy.hpp"
#include "model/resnet.hpp"

namespace strata {

template <class T>
class ResNetSteps : public OdeNetwork<T> {
 public:
  explicit ResNetSteps(ResNet<T>& net) : net_(net) {}
  int64_t steps() const override { return net_.steps(); }
  T h() const override { return net_.h(); }
  int64_t state_size() const override { return net_.state_size(); }
  std::pair<int64_t, int64_t> held_steps() const override {
    return {net_.placement().layer_begin, net_.placement().layer_end};
  }
  void open_forward(const SampleBatch<T>& batch, V2<T> u0) override { net_.open_forward(batch.features, u0); }
  void open_backward(const SampleBatch<T>& batch, V2<const T> du0) override {
    net_.open_backward(batch.features, du0, scratch_);
  }
  void step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out) override {
    net_.step_forward(n, dt, u, u_out, scratch_);
  }
  void step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, bool grads) override {
    net_.step_adjoint(n, dt, u, lambda_out, lambda_in, scratch_, grads);
  }
  LossSums close_forward(V2<const T> u_n, const SampleBatch<T>& batch) override {
    const int64_t b = u_n.extent(0);
    ensure_extents(logits_, "resnet_steps.logits", b, net_.config().classes);
    ensure_extents(lse_, "resnet_steps.lse", b);
    ensure_extents(losses_, "resnet_steps.losses", b);
    LossSums s;
    s.loss = net_.close_forward(u_n, batch.targets, logits_, lse_, losses_);
    s.correct = kernels::count_correct<T>(logits_, batch.targets);
    return s;
  }
  void close_backward(V2<const T> u_n, const SampleBatch<T>& batch, T dloss_scale, V2<T> du_n) override {
    net_.close_backward(u_n, batch.targets, dloss_scale, logits_, lse_, du_n);
  }
  int64_t bytes() const override { return scratch_.bytes() + view_bytes(logits_, lse_, losses_); }

 private:
  ResNet<T>& net_;
  StepScratch<T> scratch_;
  Tensor2<T> logits_;
  Tensor1<T> lse_, losses_;
};

// The network's steps attached to it (StageModel::attach_ode_network); returns the network.
template <class T>
ResNet<T>& attach_steps(ResNet<T>& net) {
  net.attach_ode_network(std::make_unique<ResNetSteps<T>>(net));
  return net;
}

}  // namespace strata
