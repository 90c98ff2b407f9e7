#pragma once
// The GPT's blocks as the steps of an ODE (ode_network.hpp), for layer-parallel training
// (Jiang et al., "Layer-Parallel Training for Transformers", arXiv 2601.09026): a pre-LN
// block is the step
//   X_mid = X + h phi1(X),   X_next = X_mid + h phi2(X_mid),
// phi1 = attention o ln1 and phi2 = MLP o ln2, which at h = 1 is the block itself (the
// fine step: the serial GPT, bit for bit). A coarse level's step of size c^l takes it with
// h = c^l and one fine block's weights (TransformerBlock::forward's scale). This is
// forward Euler on the two branches in turn (a Lie splitting of dX/dt = phi1 + phi2), as
// torchbraid's decoder-only example writes its step; the paper's form
// X + h (phi1(X) + phi2(X + phi1(X))) is the same at h = 1 and differs only on the coarse
// levels. Strata takes the split form: each substep is a plain residual step x + h f(x)
// whose input passes through a layer norm, so a coarse step of size 4 or 16 stays bounded
// where the attention's output feeds the MLP's norm, and the backward of each substep is
// the block's own with its output gradient scaled.
//
// The steps are the layers between the open and the close buffers (StagePlacement::
// layer_steps): the opening part is the embedding and the open buffer's blocks, run
// serially on the first layer rank; the closing part the close buffer's blocks, the final
// norm, the head and the loss, on the last. A state is a sample's (T, C) residual stream.
// Those parts run as the GPT's own stage passes on their chunks, in caches kept here.
#include <memory>

#include "model/gpt.hpp"

namespace strata {

template <class T>
class GPTLayerSteps : public OdeNetwork<T> {
 public:
  explicit GPTLayerSteps(GPT<T>& gpt);
  int64_t steps() const override { return place_.step_count; }
  T h() const override { return T(1); }
  int64_t state_size() const override { return gpt_.config().seq_len * gpt_.config().n_embd; }
  std::pair<int64_t, int64_t> held_steps() const override;
  void open_forward(const SampleBatch<T>& batch, V2<T> u0) override;
  void open_backward(const SampleBatch<T>& batch, V2<const T> du0) override;
  void step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out) override;
  void step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in, bool grads) override;
  LossSums close_forward(V2<const T> u_n, const SampleBatch<T>& batch) override;
  void close_backward(V2<const T> u_n, const SampleBatch<T>& batch, T dloss_scale, V2<T> du_n) override;
  int64_t bytes() const override;

 private:
  // a state (samples, T C) as the blocks' rows (samples T, C)
  template <class V>
  V rows_of(V u) const {
    return V(u.data(), u.extent(0) * gpt_.config().seq_len, gpt_.config().n_embd);
  }
  BlockContext context(int64_t samples) const { return {samples, gpt_.config().seq_len}; }
  GPT<T>& gpt_;
  const StagePlacement& place_;
  std::unique_ptr<StageCache> open_, close_;  // the first and last layer rank's
  TransformerCache<T> step_;                  // one step's activations, reused by every step
};

// The GPT's layer steps attached to it (StageModel::attach_ode_network) where its placement
// holds them (StagePlacement::layer_steps); no-op otherwise.
template <class T>
void attach_layer_steps(GPT<T>& gpt) {
  if (gpt.placement().holds_layer_steps()) gpt.attach_ode_network(std::make_unique<GPTLayerSteps<T>>(gpt));
}

}  // namespace strata
