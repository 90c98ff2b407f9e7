#include "plan/engine_traffic.hpp"

#include "engine/grad_buckets.hpp"
#include "optim/unit_gradient_sum.hpp"
#include "optim/zero3_gathers.hpp"
#include "optim/zero_sharding.hpp"

namespace strata {
namespace {
// The 1D or 3D tensor ranks that are expert ranks too (1: none).
template <class T>
int expert_ways_of(const StageFootprint<T>& model) {
  const auto& tp = model.tensor_parallel();
  return tp.traits().expert_ways;
}
}  // namespace

std::vector<std::pair<int, bool>> stage_passes(const StageProgram& program) {
  std::vector<std::pair<int, bool>> passes;
  for (const auto& in : program)
    if (in.op == PipeOp::Forward || in.op == PipeOp::Backward || in.op == PipeOp::BackwardInput)
      passes.emplace_back(in.chunk, in.op != PipeOp::Forward);
  return passes;
}

std::vector<BackwardPart> stage_backwards(const StageProgram& program) {
  std::vector<BackwardPart> out;
  for (const auto& in : program)
    if (in.op == PipeOp::Backward || in.op == PipeOp::BackwardInput || in.op == PipeOp::BackwardWeight)
      out.push_back(in.op == PipeOp::Backward        ? BackwardPart::Whole
                    : in.op == PipeOp::BackwardInput ? BackwardPart::Input
                                                     : BackwardPart::Weight);
  return out;
}

template <class T>
Traffic data_parallel_traffic(const StageFootprint<T>& model, int data_ranks, double bucket_bytes, int64_t local_batch,
                              int micro_batches, int zero, GatherPolicy policy, NodeSum node_sum) {
  Traffic out;
  for (int j = 0; j < micro_batches; ++j) model.micro_batch_traffic(model.context(local_batch / micro_batches), out);
  const int64_t e = sizeof(T);
  if (zero >= 2 && data_ranks > 1) {
    const auto units = zero2_units(model, data_ranks);
    const Zero3Gathers gathers =
        zero == 3 ? zero3_gathers(model, units, data_parallel_passes(micro_batches), policy) : Zero3Gathers{};
    zero2_traffic(out, units, data_ranks, micro_batches, e, units_named_twice(model, units),
                  zero == 3 ? &gathers.gathers : nullptr);
    out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, sizeof(double));  // the loss
    return out;
  }
  if (bucket_bytes > 0 && data_ranks > 1 && !zero && node_sum.per_node == 0) {
    GradBuckets buckets(bucket_bytes, e, [&](int64_t, int64_t count) {
      out.add("data", "allreduce_overlapped", Collective::AllReduce, data_ranks, count * e);
    });
    for (const auto& [begin, end] : model.grad_ready_order()) buckets.ready(begin, end - begin);
    buckets.flush();
    gradient_sum_traffic(out, model.params(), data_ranks, false, true,
                         expert_ways_of(model));  // the experts', after the buckets
  } else {
    gradient_sum_traffic(out, model.params(), data_ranks, zero > 0, false, expert_ways_of(model), node_sum);
  }
  out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, sizeof(double));  // the loss
  return out;
}

template <class T>
Traffic pipeline_traffic(const StageFootprint<T>& model, const PipeSchedule& s, int data_ranks, int64_t local_batch,
                         int zero, GatherPolicy policy, NodeSum node_sum) {
  const auto& place = model.placement();
  const BlockContext ctx = model.context(local_batch / s.micro_batches);
  const int64_t e = sizeof(T);
  const int64_t tied =
      model.params().table().tied_index() >= 0 ? model.params().infos()[model.params().table().tied_index()].numel : 0;
  const auto [rows, cols] = model.boundary_shape(ctx);
  const TensorParallel& tp = model.tensor_parallel();
  const bool stream = s.kind == Schedule::XPipe;
  std::vector<Traffic> micro(static_cast<size_t>(s.virtual_stages));  // per chunk
  for (int c = 0; c < s.virtual_stages; ++c) model.micro_batch_traffic(ctx, micro[size_t(c)], c);
  Traffic out;
  for (const auto& in : s.programs[place.stage]) {
    switch (in.op) {
      case PipeOp::Forward:
        out.add(micro[size_t(in.chunk)]);
        break;  // with its backward
      case PipeOp::SendAct:
      case PipeOp::SendGrad:
        out.add("pipeline", "send", Collective::Send, s.stages, rows * cols * e);
        break;
      case PipeOp::RecvAct:
      case PipeOp::RecvGrad:
        out.add("pipeline", "recv", Collective::Send, s.stages, 0);
        break;
      case PipeOp::OptimizerStep:
        if (!stream) break;
        gradient_sum_traffic(out, model.params(), data_ranks, false, false, expert_ways_of(model), node_sum);
        if (!tp.as<WholeTensors>())  // the stage's gradient norm, over the split's group
          out.add("tensor", "allreduce_scalar", Collective::AllReduce, tp.size(), sizeof(double));
        break;
      case PipeOp::SendTiedGrad:
        out.add("tied_emb", "send", Collective::Send, 2, tied * e);
        break;
      case PipeOp::SendTiedWeights:
        out.add("tied_emb", "send", Collective::Send, 2, tied * e, 3);
        break;  // and moments
      case PipeOp::RecvTiedGrad:
        out.add("tied_emb", "recv", Collective::Send, 2, 0);
        break;
      case PipeOp::RecvTiedWeights:
        out.add("tied_emb", "recv", Collective::Send, 2, 0, 3);
        break;
      default:
        break;
    }
  }
  const int64_t k = s.mini_batches, d = sizeof(double);
  if (stream) {
    out.add("pipeline", "allreduce", Collective::AllReduce, s.stages, 2 * k * d);  // losses and norms
    replica_sum_traffic(out, data_ranks, node_sum, k, d);
  } else {
    const bool tied_ends = s.stages > 1 && (place.first() || place.last()) && model.params().table().tied_index() >= 0;
    if (zero >= 2 && data_ranks > 1) {  // each unit's sums (and gathers); the two copies of wte sum their parts
      const auto units = zero2_units(model, data_ranks);
      const Zero3Gathers gathers =
          zero == 3 ? zero3_gathers(model, units, stage_passes(s.programs[place.stage]), policy) : Zero3Gathers{};
      zero2_traffic(out, units, data_ranks, s.micro_batches, e, units_named_twice(model, units),
                    zero == 3 ? &gathers.gathers : nullptr);
      if (tied_ends) {  // the parts of the units it spans (ZeRO-2/3's finer units: its vocabulary chunks), at once
        const auto& wte = model.params().infos()[size_t(model.params().table().tied_index())];
        int64_t part = 0;
        for (const auto& u : units)
          if (u.from >= wte.offset && u.from < wte.offset + wte.numel) part += u.part();
        out.add("tied_emb", "allreduce", Collective::AllReduce, 2, part * e);
      }
    } else {
      if (tied_ends) out.add("tied_emb", "allreduce", Collective::AllReduce, 2, tied * e);
      gradient_sum_traffic(out, model.params(), data_ranks, zero > 0, false, expert_ways_of(model), node_sum);
    }
    out.add("pipeline", "allreduce_scalar", Collective::AllReduce, s.stages, d);
    out.add("data", "allreduce_scalar", Collective::AllReduce, data_ranks, d);
  }
  return out;
}

template Traffic data_parallel_traffic<float>(const StageFootprint<float>&, int, double, int64_t, int, int,
                                              GatherPolicy, NodeSum);
template Traffic data_parallel_traffic<double>(const StageFootprint<double>&, int, double, int64_t, int, int,
                                               GatherPolicy, NodeSum);
template Traffic pipeline_traffic<float>(const StageFootprint<float>&, const PipeSchedule&, int, int64_t, int,
                                         GatherPolicy, NodeSum);
template Traffic pipeline_traffic<double>(const StageFootprint<double>&, const PipeSchedule&, int, int64_t, int,
                                          GatherPolicy, NodeSum);

}  // namespace strata
