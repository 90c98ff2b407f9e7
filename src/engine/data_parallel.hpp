#pragma once
// Data-parallel driver: every rank holds a full replica, runs forward and backward on its
// share of the global batch, and the gradients are summed over the data group so that
// every replica applies the same update. The loss is scaled by the *global* count of loss
// terms, so the summed gradient is the gradient of the global mean loss, whatever the
// rank count.
//
// Gradients are reduced in buckets (GradBuckets): as the model reports each block's
// gradients final (from the last block to the first), adjacent ranges are merged until a
// bucket holds bucket_bytes, and its all-reduce starts at once; with NCCL it overlaps the
// rest of the backward, with MPI it completes after it (Comm::start_allreduce_sum).
//
// Gradient accumulation: with micro_batches m > 1 the local batch runs as m micro-batches
// one after the other, each forward and backward adding to the same gradients, so only one
// micro-batch's activations are kept; the all-reduce starts with the last micro-batch's
// backward, once per step. The sum is the same gradient as the whole batch's.
//
// ZeRO-1 (a store whose moments are sharded, optim/zero_sharding.hpp): one reduce-scatter
// of the gradients after the backward instead of the buckets' all-reduces. ZeRO-2 (a store
// whose gradients are sharded too): every micro-batch's gradients reduce-scattered unit by
// unit as the backward makes them final (optim/unit_gradient_sum.hpp), each rank keeping
// its part of each.
#include <memory>

#include "comm/comm.hpp"
#include "core/timers.hpp"
#include "engine/train_engine.hpp"

namespace strata {

template <class T>
class DataParallel : public StepEngine<T> {
 public:
  // model: the whole model (one stage). bucket_bytes = 0: one all-reduce of all gradients
  // after the backward. micro_batches: the local batch's micro-batches (a divisor of it).
  // expert_data: the ranks that hold the same experts (Grid::expert_replicas(); the
  // data group without expert parallelism).
  DataParallel(StageModel<T>& model, Comm& data_comm, Comm& expert_data, double bucket_bytes = 0, int micro_batches = 1)
      : StepEngine<T>(model), comm_(data_comm), expert_comm_(expert_data), bucket_bytes_(bucket_bytes),
        micro_batches_(micro_batches), cache_(model.make_cache()) {}

  BatchResult forward_backward(const SampleBatch<T>& batch, int64_t global_batch, Timers& timers) override;
  BatchResult evaluate(const SampleBatch<T>& batch, int64_t global_batch) override;
  int64_t activation_bytes() const override { return cache_->bytes(); }

 private:
  using TrainEngine<T>::model_;
  Comm& comm_;
  Comm& expert_comm_;
  double bucket_bytes_;
  int micro_batches_;
  std::unique_ptr<StageCache> cache_;
  // micro-batch j of a local batch
  SampleBatch<T> micro_batch(const SampleBatch<T>& batch, int j) const;
  // the global sums of the replicas' loss terms and correct predictions
  BatchResult reduce(double local_loss_sum, int64_t local_correct, double global_terms);
};

}  // namespace strata
