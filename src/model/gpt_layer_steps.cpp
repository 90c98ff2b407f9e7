#include "model/gpt_layer_steps.hpp"

namespace strata {

template <class T>
GPTLayerSteps<T>::GPTLayerSteps(GPT<T>& gpt) : gpt_(gpt), place_(gpt.placement()) {
  if (place_.first()) open_ = gpt.make_cache(0);
  if (place_.last()) close_ = gpt.make_cache(place_.chunk_count() - 1);
}

template <class T>
std::pair<int64_t, int64_t> GPTLayerSteps<T>::held_steps() const {
  const auto [begin, end] = place_.chunk(place_.steps_chunk());
  return {begin - place_.step_offset, end - place_.step_offset};
}

template <class T>
void GPTLayerSteps<T>::open_forward(const SampleBatch<T>& batch, V2<T> u0) {
  gpt_.forward(context(batch.samples), batch, {}, *open_);
  Kokkos::deep_copy(rows_of(u0), gpt_.output(*open_));
}

template <class T>
void GPTLayerSteps<T>::open_backward(const SampleBatch<T>& batch, V2<const T> du0) {
  gpt_.backward(context(batch.samples), T(0), rows_of(du0), *open_);  // (the scale reaches the head only)
}

template <class T>
void GPTLayerSteps<T>::step_forward(int64_t n, T dt, V2<const T> u, V2<T> u_out) {
  gpt_.block_forward(place_.step_offset + int(n), context(u.extent(0)), rows_of(u), step_, dt);
  Kokkos::deep_copy(rows_of(u_out), step_.out);
}

template <class T>
void GPTLayerSteps<T>::step_adjoint(int64_t n, T dt, V2<const T> u, V2<const T> lambda_out, V2<T> lambda_in,
                                    bool grads) {
  const int l = place_.step_offset + int(n);
  const BlockContext ctx = context(u.extent(0));
  gpt_.block_forward(l, ctx, rows_of(u), step_, dt);  // the step's activations at u
  Kokkos::deep_copy(lambda_in, lambda_out);
  gpt_.block_backward(l, ctx, rows_of(lambda_in), step_, grads);
}

template <class T>
LossSums GPTLayerSteps<T>::close_forward(V2<const T> u_n, const SampleBatch<T>& batch) {
  LossSums s;
  s.loss = gpt_.forward(context(batch.samples), batch, rows_of(u_n), *close_);
  return s;
}

template <class T>
void GPTLayerSteps<T>::close_backward(V2<const T> u_n, const SampleBatch<T>& batch, T dloss_scale, V2<T> du_n) {
  (void)u_n;  // the close part's forward kept it
  gpt_.backward(context(batch.samples), dloss_scale, {}, *close_);
  Kokkos::deep_copy(rows_of(du_n), gpt_.input_grad(*close_));
}

template <class T>
int64_t GPTLayerSteps<T>::bytes() const {
  return step_.bytes() + (open_ ? open_->bytes() : 0) + (close_ ? close_->bytes() : 0);
}

template class GPTLayerSteps<float>;
template class GPTLayerSteps<double>;

}  // namespace strata
