#include "engine/data_parallel.hpp"

#include <algorithm>

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
  auto& grads = model_.params().grads();
  timers.start("backward");
  if (bucket_bytes_ > 0 && comm_.size() > 1) {
    const int64_t bucket = std::max<int64_t>(1, int64_t(bucket_bytes_ / sizeof(T)));
    int64_t lo = -1, hi = -1;  // the pending bucket [lo, hi), grown downwards
    const auto launch = [&] {
      if (hi > lo) comm_.start_allreduce_sum(V1<T>(grads.data() + lo, hi - lo));
      lo = hi = -1;
    };
    model_.backward(ctx, T(1.0 / global_tokens), [&](int64_t offset, int64_t count) {
      if (hi < 0) hi = offset + count;
      lo = offset;
      if (hi - lo >= bucket) launch();
      comm_.progress();
    });
    launch();
    timers.stop("backward");
    timers.start("grad_allreduce");  // what is left of the reduction after the backward
    comm_.finish_allreduces();
  } else {
    model_.backward(ctx, T(1.0 / global_tokens));
    timers.stop("backward");
    timers.start("grad_allreduce");
    comm_.allreduce_sum(grads);
  }
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
