#include "engine/data_parallel.hpp"

namespace strata {

template <class T>
double DataParallel<T>::forward_backward(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                                         int64_t global_batch, Timers& timers) {
  const BlockContext ctx{local_batch, model_.config().seq_len};
  const double global_tokens = double(global_batch) * double(ctx.seq_len);
  model_.params().zero_grads();
  timers.start("forward");
  const double local_loss_sum = model_.forward(ctx, tokens, targets);
  timers.stop("forward");
  timers.start("backward");
  model_.backward(ctx, T(1.0 / global_tokens));
  timers.stop("backward");
  timers.start("grad_allreduce");
  comm_.allreduce_sum(model_.params().grads());
  const double loss = comm_.allreduce_sum(local_loss_sum) / global_tokens;
  timers.stop("grad_allreduce");
  return loss;
}

template <class T>
double DataParallel<T>::evaluate(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                                 int64_t global_batch) {
  const BlockContext ctx{local_batch, model_.config().seq_len};
  const double local = model_.forward(ctx, tokens, targets);
  return comm_.allreduce_sum(local) / (double(global_batch) * double(ctx.seq_len));
}

template class DataParallel<float>;
template class DataParallel<double>;

}  // namespace strata
