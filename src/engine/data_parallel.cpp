#include "engine/data_parallel.hpp"

#include <algorithm>

#include "engine/grad_buckets.hpp"
#include "optim/unit_gradient_sum.hpp"
#include "optim/zero_sharding.hpp"

namespace strata {

template <class T>
SampleBatch<T> DataParallel<T>::micro_batch(const SampleBatch<T>& batch, int j) const {
  if (micro_batches_ == 1) return batch;
  const int64_t per = batch.samples / micro_batches_;
  return batch.slice(j * per, (j + 1) * per, model_.targets_per_sample());
}

template <class T>
BatchResult DataParallel<T>::forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) {
  const BlockContext ctx = model_.context(batch.samples / micro_batches_);
  const T scale = T(1.0 / (double(global_batch) * double(ctx.seq_len)));
  model_.params().zero_grads();
  auto& grads = model_.params().grads();
  double local_loss_sum = 0;
  int64_t local_correct = 0;
  // ZeRO-2: the units the backward names summed every micro-batch, the others at the end
  std::unique_ptr<UnitGradientSum<T>> unit_sum;
  if (model_.params().zero().gradients_sharded())
    unit_sum = std::make_unique<UnitGradientSum<T>>(comm_, expert_comm_, model_.params());
  for (int j = 0; j < micro_batches_; ++j) {
    const bool last = j + 1 == micro_batches_;
    timers.start("forward");
    local_loss_sum += model_.forward(ctx, micro_batch(batch, j), {}, *cache_);
    if (model_.counts_correct()) local_correct += model_.correct(*cache_);
    timers.stop("forward");
    timers.start("backward");
    if (unit_sum) {
      model_.backward(ctx, scale, {}, *cache_, [&](int64_t offset, int64_t count) { unit_sum->ready(offset, count); });
      timers.stop("backward");
      if (last) {
        timers.start("grad_allreduce");  // what is left of the sums after the backward
        unit_sum->finish();
      }
    } else if (!last) {  // the gradients add up; the sums wait for the last micro-batch
      model_.backward(ctx, scale, {}, *cache_);
      timers.stop("backward");
    } else if (bucket_bytes_ > 0 && comm_.size() > 1 && !model_.params().zero().moments_sharded() &&
               !comm_.sums_by_node()) {  // (node by node: one sum after the backward)
      GradBuckets buckets(bucket_bytes_, sizeof(T), [&](int64_t offset, int64_t count) {
        comm_.start_allreduce_sum(V1<T>(grads.data() + offset, count));
      });
      model_.backward(ctx, scale, {}, *cache_, [&](int64_t offset, int64_t count) { buckets.ready(offset, count); });
      buckets.flush();
      timers.stop("backward");
      timers.start("grad_allreduce");  // what is left of the reduction after the backward
      comm_.finish_allreduces();
      // the buckets hold the other parameters; without expert parallelism the experts' go over the same group
      sum_expert_gradients(expert_comm_.size() == comm_.size() ? comm_ : expert_comm_, model_.params());
    } else {
      model_.backward(ctx, scale, {}, *cache_);
      timers.stop("backward");
      timers.start("grad_allreduce");
      sum_gradients(comm_, expert_comm_, model_.params());  // all of them, or with ZeRO-1 this rank's block
    }
  }
  const BatchResult result = reduce(local_loss_sum, local_correct, double(global_batch) * double(ctx.seq_len));
  timers.stop("grad_allreduce");
  return result;
}

template <class T>
BatchResult DataParallel<T>::reduce(double local_loss_sum, int64_t local_correct, double global_terms) {
  BatchResult r;
  r.loss = comm_.allreduce_sum(local_loss_sum) / global_terms;
  if (model_.counts_correct()) r.correct = int64_t(comm_.allreduce_sum(double(local_correct)) + 0.5);
  return r;
}

template <class T>
BatchResult DataParallel<T>::evaluate(const SampleBatch<T>& batch, int64_t global_batch) {
  const BlockContext ctx = model_.context(batch.samples / micro_batches_);
  double local_loss_sum = 0;
  int64_t local_correct = 0;
  for (int j = 0; j < micro_batches_; ++j) {
    local_loss_sum += model_.forward(ctx, micro_batch(batch, j), {}, *cache_);
    if (model_.counts_correct()) local_correct += model_.correct(*cache_);
  }
  return reduce(local_loss_sum, local_correct, double(global_batch) * double(ctx.seq_len));
}

template class DataParallel<float>;
template class DataParallel<double>;

}  // namespace strata
