#include "engine/pipeline/pipeline_engine.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/pipeline/simulate.hpp"

namespace strata {
namespace {
constexpr int act_tag(int mb) { return 2 * mb; }
constexpr int grad_tag(int mb) { return 2 * mb + 1; }
}  // namespace

template <class T>
PipelineEngine<T>::PipelineEngine(GPT<T>& model, const Grid& grid, Comm& data_comm, PipeSchedule schedule)
    : model_(model), data_(data_comm), pipe_(grid.pipeline_group()), schedule_(std::move(schedule)),
      stage_(grid.coords().pipeline) {
  if (schedule_.stages != int(grid.shape().pipeline))
    throw std::logic_error("pipeline schedule for " + std::to_string(schedule_.stages) + " stages on a grid of " +
                           std::to_string(grid.shape().pipeline));
  if (grid.embedding_group() != MPI_COMM_NULL) embedding_ = std::make_unique<Comm>(grid.embedding_group());
  for (const auto& in : schedule_.programs[stage_])
    if (in.op == PipeOp::PredictWeights || in.op == PipeOp::RestoreWeights)
      throw std::logic_error("PipelineEngine runs flushing schedules (gpipe, 1f1b), not " + schedule_.name);
  const PipeSimulation sim = simulate_schedule(schedule_);
  if (sim.deadlock) throw std::logic_error("pipeline schedule deadlocks: " + sim.deadlock_report);
  slots_ = std::max(1, sim.peak_in_flight[stage_]);
}

template <class T>
void PipelineEngine<T>::ensure_buffers(const BlockContext& ctx) {
  const int m = schedule_.micro_batches;
  const auto [rows, cols] = model_.stage_activation_shape(ctx);
  if (!act_in_.empty() && int64_t(act_in_[0].dev.extent(0)) == rows) return;
  acts_.assign(slots_, GPTActivations<T>{});
  for (auto* list : {&act_in_, &grad_in_, &act_out_, &grad_out_}) {
    list->assign(list == &act_in_ || list == &grad_in_ ? m : slots_, Buffer{});
    for (auto& b : *list) {
      b.dev = Tensor2<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "pipeline.message"), rows, cols);
      b.host = Kokkos::create_mirror_view(b.dev);
    }
  }
}

template <class T>
void PipelineEngine<T>::send(V2<const T> data, Buffer& staging, int peer, int tag) {
  Kokkos::fence();  // the kernels that produced data are done
  const T* host = data.data();
  if constexpr (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    Kokkos::deep_copy(staging.dev, data);
    Kokkos::deep_copy(staging.host, staging.dev);
    host = staging.host.data();
  }
  staging.request = pipe_.start_send(host, int64_t(data.size()), peer, tag);
}

template <class T>
void PipelineEngine<T>::receive_wait(Buffer& b) {
  pipe_.wait(b.request, "recv");
  Kokkos::deep_copy(b.dev, b.host);  // no-op where they are the same memory
}

template <class T>
double PipelineEngine<T>::forward_backward(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                                           int64_t global_batch, Timers& timers) {
  const int m = schedule_.micro_batches;
  const int64_t t_len = model_.config().seq_len, bm = local_batch / m;
  const BlockContext ctx{bm, t_len};
  const double global_tokens = double(global_batch) * double(t_len);
  ensure_buffers(ctx);
  model_.params().zero_grads();
  const auto& program = schedule_.programs[stage_];
  // every receive of the step is posted now; a Recv instruction waits for its message
  for (const auto& in : program) {
    if (in.op == PipeOp::RecvAct)
      act_in_[in.mb].request = pipe_.start_recv(act_in_[in.mb].host.data(), act_in_[in.mb].host.size(), in.peer, act_tag(in.mb));
    if (in.op == PipeOp::RecvGrad)
      grad_in_[in.mb].request =
          pipe_.start_recv(grad_in_[in.mb].host.data(), grad_in_[in.mb].host.size(), in.peer, grad_tag(in.mb));
  }
  const auto rows_of = [&](int mb) { return std::make_pair(mb * bm * t_len, (mb + 1) * bm * t_len); };
  const auto slot = [&](int mb) { return mb % slots_; };
  double loss_sum = 0;
  for (const auto& in : program) {
    switch (in.op) {
      case PipeOp::RecvAct:
      case PipeOp::RecvGrad:
        timers.start("pipeline_wait");  // the bubble, as seen from this stage
        receive_wait(in.op == PipeOp::RecvAct ? act_in_[in.mb] : grad_in_[in.mb]);
        timers.stop("pipeline_wait", to_string(in));
        break;
      case PipeOp::Forward:
        // the slot's previous micro-batch has finished its backward; its sends must be done
        for (auto* out : {&act_out_[slot(in.mb)], &grad_out_[slot(in.mb)]})
          if (out->request != MPI_REQUEST_NULL) pipe_.wait(out->request, "send");
        timers.start("forward");
        loss_sum += model_.forward_micro(ctx, Kokkos::subview(tokens, rows_of(in.mb)),
                                         Kokkos::subview(targets, rows_of(in.mb)),
                                         model_.placement().first() ? V2<const T>() : V2<const T>(act_in_[in.mb].dev),
                                         acts_[slot(in.mb)]);
        timers.stop("forward", to_string(in));
        break;
      case PipeOp::Backward:
        timers.start("backward");
        model_.backward_micro(ctx, T(1.0 / global_tokens),
                              model_.placement().last() ? V2<const T>() : V2<const T>(grad_in_[in.mb].dev),
                              acts_[slot(in.mb)]);
        timers.stop("backward", to_string(in));
        break;
      case PipeOp::SendAct:
        send(model_.stage_output(acts_[slot(in.mb)]), act_out_[slot(in.mb)], in.peer, act_tag(in.mb));
        break;
      case PipeOp::SendGrad: send(acts_[slot(in.mb)].dres, grad_out_[slot(in.mb)], in.peer, grad_tag(in.mb)); break;
      case PipeOp::OptimizerStep: break;  // the trainer steps once the gradients are reduced
      case PipeOp::PredictWeights:
      case PipeOp::RestoreWeights: break;  // rejected by the constructor
    }
  }
  timers.start("pipeline_drain");
  for (auto* list : {&act_out_, &grad_out_})
    for (auto& b : *list)
      if (b.request != MPI_REQUEST_NULL) pipe_.wait(b.request, "send");
  timers.stop("pipeline_drain");
  timers.start("grad_allreduce");
  auto& store = model_.params();
  if (embedding_) embedding_->allreduce_sum(store.grad(model_.wte_index()));  // the two copies of wte
  data_.allreduce_sum(store.grads());
  const double loss = data_.allreduce_sum(pipe_.allreduce_sum(loss_sum)) / global_tokens;
  timers.stop("grad_allreduce");
  return loss;
}

template <class T>
double PipelineEngine<T>::evaluate(V1<const int32_t> tokens, V1<const int32_t> targets, int64_t local_batch,
                                   int64_t global_batch) {
  // forward only, micro-batch after micro-batch: each stage receives, computes, sends on
  const int m = schedule_.micro_batches;
  const int64_t t_len = model_.config().seq_len, bm = local_batch / m;
  const BlockContext ctx{bm, t_len};
  ensure_buffers(ctx);
  const auto& place = model_.placement();
  double loss_sum = 0;
  for (int mb = 0; mb < m; ++mb) {
    const auto rows = std::make_pair(mb * bm * t_len, (mb + 1) * bm * t_len);
    if (!place.first()) {
      act_in_[mb].request = pipe_.start_recv(act_in_[mb].host.data(), act_in_[mb].host.size(), stage_ - 1, act_tag(mb));
      receive_wait(act_in_[mb]);
    }
    loss_sum += model_.forward_micro(ctx, Kokkos::subview(tokens, rows), Kokkos::subview(targets, rows),
                                     place.first() ? V2<const T>() : V2<const T>(act_in_[mb].dev), acts_[0]);
    if (!place.last()) {
      send(model_.stage_output(acts_[0]), act_out_[0], stage_ + 1, act_tag(mb));
      pipe_.wait(act_out_[0].request, "send");
    }
  }
  return data_.allreduce_sum(pipe_.allreduce_sum(loss_sum)) / (double(global_batch) * double(t_len));
}

template <class T>
int64_t PipelineEngine<T>::activation_bytes() const {
  int64_t b = 0;
  for (const auto& a : acts_) b += a.bytes();
  for (const auto* list : {&act_in_, &grad_in_, &act_out_, &grad_out_})
    for (const auto& m : *list) b += view_bytes(m.dev);  // host mirrors share it on CPUs
  return b;
}

template class PipelineEngine<float>;
template class PipelineEngine<double>;

}  // namespace strata
