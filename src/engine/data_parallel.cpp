#include "engine/data_parallel.hpp"

#include <algorithm>

#include "engine/grad_buckets.hpp"

namespace strata {

template <class T>
BatchResult DataParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  const BlockContext ctx = model_.context(batch.samples);
  const double global_tokens = double(global_batch) * double(ctx.seq_len);
  model_.params().zero_grads();
  timers.start("forward");
  const double local_loss_sum = model_.forward(ctx, batch, {}, *cache_);
  timers.stop("forward");
  auto& grads = model_.params().grads();
  timers.start("backward");
  if (bucket_bytes_ > 0 && comm_.size() > 1) {
    GradBuckets buckets(bucket_bytes_, sizeof(T), [&](int64_t offset, int64_t count) {
      comm_.start_allreduce_sum(V1<T>(grads.data() + offset, count));
    });
    model_.backward(ctx, T(1.0 / global_tokens), {}, *cache_,
                    [&](int64_t offset, int64_t count) { buckets.ready(offset, count); });
    buckets.flush();
    timers.stop("backward");
    timers.start("grad_allreduce");  // what is left of the reduction after the backward
    comm_.finish_allreduces();
  } else {
    model_.backward(ctx, T(1.0 / global_tokens), {}, *cache_);
    timers.stop("backward");
    timers.start("grad_allreduce");
    comm_.allreduce_sum(grads);
  }
  const BatchResult result = reduce(local_loss_sum, global_tokens);
  timers.stop("grad_allreduce");
  return result;
}

template <class T>
BatchResult DataParallel<T>::reduce(double local_loss_sum, double global_terms) {
  BatchResult r;
  r.loss = comm_.allreduce_sum(local_loss_sum) / global_terms;
  if (model_.counts_correct()) r.correct = int64_t(comm_.allreduce_sum(double(model_.correct(*cache_))) + 0.5);
  return r;
}

template <class T>
BatchResult DataParallel<T>::evaluate(const SampleBatch<T>& batch, int64_t global_batch) {
  const BlockContext ctx = model_.context(batch.samples);
  const double local = model_.forward(ctx, batch, {}, *cache_);
  return reduce(local, double(global_batch) * double(ctx.seq_len));
}

template <class T>
Traffic data_parallel_traffic(const StageModel<T>& model, int data_ranks, double bucket_bytes, int64_t local_batch) {
  Traffic out;
  model.micro_batch_traffic(model.context(local_batch), out);
  const int64_t e = sizeof(T);
  if (bucket_bytes > 0 && data_ranks > 1) {
    GradBuckets buckets(bucket_bytes, e, [&](int64_t, int64_t count) {
      out.add("data", "allreduce_overlapped", Collective::AllReduce, data_ranks, count * e);
    });
    for (const auto& [begin, end] : model.grad_ready_order()) buckets.ready(begin, end - begin);
    buckets.flush();
  } else {
    out.add("data", "allreduce", Collective::AllReduce, data_ranks, model.params().numel() * e);
  }
  out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, sizeof(double));  // the loss
  return out;
}

template Traffic data_parallel_traffic<float>(const StageModel<float>&, int, double, int64_t);
template Traffic data_parallel_traffic<double>(const StageModel<double>&, int, double, int64_t);
template class DataParallel<float>;
template class DataParallel<double>;

}  // namespace strata
