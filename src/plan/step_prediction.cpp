#include "plan/step_prediction.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "engine/layer_parallel/mgrit_cost.hpp"
#include "engine/pipeline/simulate.hpp"
#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "optim/unit_gradient_sum.hpp"
#include "optim/zero3_gathers.hpp"
#include "optim/zero_sharding.hpp"
#include "plan/dry_models.hpp"
#include "plan/engine_traffic.hpp"
#include "plan/links.hpp"
#include "plan/stage_costs.hpp"

namespace strata {
namespace {

PipeSchedule schedule_of(const Layout& l, int mini_batches) {
  return make_schedule(l.schedule, l.pipeline, l.micro_batches, mini_batches,
                       l.schedule == Schedule::Interleaved ? l.virtual_stages : 1);
}

struct StageCosts {
  double compute = 0;      // per micro-batch, forward and backward: GEMMs and the non-GEMM work
  double gemm = 0;         // per micro-batch, of which GEMMs
  double tensor = 0;       // per micro-batch, tensor-parallel communication not hidden
  double sums = 0;         // per step: the gradient sums' time not hidden by the backward
  double optimizer = 0;    // per step: AdamW and the norm (XPipe: with the sums, in the stream)
  double predict = 0;      // XPipe: one weight prediction of the stage's parameters
  double weight_half = 0;  // per micro-batch: the backward's weight half (zero-bubble schedules)
  double after() const { return sums + optimizer; }
  double forward() const { return compute / 3 + tensor / 3; }  // the backward does twice the work
  double backward() const { return 2 * compute / 3 + 2 * tensor / 3; }
};

}  // namespace

MemoryPrediction predict_memory(const Deck& deck, const Layout& l, DryModels* models) {
  if (l.mgrit()) return layer_parallel_memory(deck, l, models);
  const int p = l.pipeline;
  const bool xpipe = p > 1 && l.schedule == Schedule::XPipe;
  const BlockContext micro{deck.data.batch_size / l.data / l.micro_batches, deck.model.seq_len};
  // the engine sizes its slots by the list it runs first: XPipe's stream of p + 1 mini-batches
  const PipeSchedule list = p > 1 ? schedule_of(l, xpipe ? p + 1 : 1) : PipeSchedule{};
  MemoryPrediction out;
  for (int s = 0; s < p; ++s) {
    const auto [state, activations] =
        stage_memory(*dry_model(models, deck, l, s), p > 1 ? &list : nullptr, micro, xpipe, zero_shards(l), l.zero,
                     l.micro_batches, keeps_rounded_copy(deck), gather_policy(deck.parallel), l.dispatch,
                     int(l.dispatch_in_flight));
    if (state + activations > out.state_bytes + out.activation_bytes) {
      out.state_bytes = state;
      out.activation_bytes = activations;
    }
  }
  return out;
}

Traffic stage_traffic(const Deck& deck, const Layout& l, int stage, int stream_steps, DryModels* models,
                      NodeSum node_sum) {
  const auto model = dry_model(models, deck, l, stage);
  const int64_t local_batch = deck.data.batch_size / l.data;
  if (l.pipeline == 1)
    return data_parallel_traffic(*model, l.replicas(), deck.parallel.grad_bucket_mb * 1e6, local_batch, l.micro_batches,
                                 l.zero, gather_policy(deck.parallel), node_sum);
  return pipeline_traffic(*model, schedule_of(l, l.schedule == Schedule::XPipe ? stream_steps : 1), l.replicas(),
                          local_batch, l.zero, gather_policy(deck.parallel), node_sum);
}

namespace {

// A micro-batch's tensor-parallel communication on a stage that its computation does not
// hide (gemm: the micro-batch's product seconds).
double exposed_tensor_seconds(const Deck& deck, const Layout& l, const MachineFile& machine, const Links& links,
                              const BlockContext& micro, const GPT<float>& model, double gemm) {
  Traffic tensor;
  for (int c = 0; c < model.placement().chunk_count(); ++c) model.micro_batch_traffic(micro, tensor, c);
  // SUMMA's broadcasts and reduces run under its GEMMs (double buffering), the ring's
  // blocks under attention's products (each posted before the step's computation); the
  // rest blocks
  const auto summa = [](const std::string&, const std::string& kind) {
    return kind == "broadcast" || kind == "reduce";
  };
  const auto ring = [](const std::string& group, const std::string& kind) {
    return group == "context" && kind == "send";
  };
  // 3D with overlap: the depth group's weight gathers and gradient reduce-scatters run
  // under the linears' products, but a quarter of them (a pass's first has no product
  // before it)
  const bool overlap_3d = tensor_split_of(l).traits().gathers_weight_blocks && deck.parallel.tensor_overlap;
  const auto depth = [&](const std::string& group, const std::string& kind) {
    return overlap_3d && group == "tensor_depth" && (kind == "allgather" || kind == "reduce_scatter");
  };
  const double depth_s = links.seconds(tensor, depth);
  return links.seconds(tensor, [&](const std::string& g,
                                   const std::string& k) { return !summa(g, k) && !ring(g, k) && !depth(g, k); }) +
         std::max(0.0, links.seconds(tensor, summa) - gemm) +
         std::max(0.0, links.seconds(tensor, ring) - attention_seconds(model, micro, machine, deck.model.precision)) +
         depth_s / 4 + std::max(0.0, 0.75 * depth_s - gemm);
}

// One micro-batch on stage s (its model given, the loss layer's cache shared or not): the
// GEMMs, the non-GEMM work as calibrate measures it (per byte of the activations a forward
// and backward keep without recomputation), the weight half, the tensor-parallel
// communication not hidden, and the update's and XPipe's prediction's arithmetic.
void micro_batch_costs(StageCosts& c, const Deck& deck, const Layout& l, int s, const MachineFile& machine,
                       const Links& links, const BlockContext& micro, const GPT<float>& model, bool shared_head,
                       DryModels* models) {
  // per micro-batch: the GEMMs, and the non-GEMM work as calibrate measures it (per byte
  // of the activations a forward and backward keep without recomputation)
  const double rate = machine.gemm_rate(deck.model.precision);
  c.gemm = product_seconds(model, micro, machine, deck.model.precision);
  // The non-GEMM work goes with the values kept, not their bytes: counted as an fp32
  // cache keeps them (as calibrate measured it), activations kept as bf16 included.
  Deck as_fp32 = deck;
  as_fp32.model.bf16_round_once = false;
  const auto fp32_model = dry_model(models, as_fp32, l, s);
  double kept = 0;  // every chunk's
  for (int k = 0; k < model.placement().chunk_count(); ++k)
    kept += double(fp32_model->memory_for(micro, k, shared_head).cache);
  if (l.recompute != Recompute::None) {
    // the backward runs again: selective, the GELU (non-GEMM work only); full, the
    // blocks' forwards (2 x 12 C^2 per token of products, and attention's forward, a
    // third of its forward and backward); and about a third of the non-GEMM work on
    // the bytes no longer kept
    Layout plain = l;
    plain.recompute = Recompute::None;
    const auto plain_model = dry_model(models, as_fp32, plain, s);
    double plain_kept = 0;
    for (int k = 0; k < plain_model->placement().chunk_count(); ++k)
      plain_kept += double(plain_model->memory_for(micro, k, shared_head).cache);
    if (l.recompute == Recompute::Full) {
      const double layers = double(model.placement().held_layers()), c_ = double(deck.model.n_embd);
      c.gemm += 24 * c_ * c_ * layers * double(micro.rows()) / double(l.tensor_size() * l.context) / rate +
                attention_seconds(model, micro, machine, deck.model.precision) / 3;
    }
    kept = plain_kept + (plain_kept - kept) / 3;
  }
  c.compute = c.gemm + kept / machine.activation_rate;
  // the weight half: dW = X^T dY of every dense product, as many flops as the forward's
  // (2 per parameter and token; attention's products have no weights)
  c.weight_half = (model.stage_flops(micro) - model.attention_model_flops(micro)) / 3 / rate;
  c.tensor = exposed_tensor_seconds(deck, l, machine, links, micro, model, c.gemm);
  // AdamW's update (with ZeRO-1, of the rank's block) and XPipe's prediction are the same
  // arithmetic over the weights and moments
  c.predict = double(model.params().numel()) / machine.adam_rate;
  c.optimizer = double(zero_block(model.params().numel(), zero_shards(l))) / machine.adam_rate;
}

// The step's gradient sums on stage s (c.sums; XPipe's inside the stream, with the
// update), from the round's traffic (`round`) and the stage's computation (c.compute).
void step_sums(StageCosts& c, const Deck& deck, const Layout& l, int s, const Links& links, const GPT<float>& model,
               const Traffic& round) {
  const int p = l.pipeline, replicas = l.replicas();
  const bool xpipe = p > 1 && l.schedule == Schedule::XPipe;
  const auto& store = model.params();
  // (ZeRO-1's reduce-scatter and all-gather cost what the all-reduce does, on a ring);
  // with expert parallelism the experts' gradients go over the expert replicas
  const int e = std::max(1, store.table().expert_split() /
                                int(l.tensor_size()));  // parallel.expert (the 1D split's ranks are expert ranks too)
  const double expert_values = e > 1 ? double(store.numel() - store.expert_begin()) : 0.0;
  const double grads = (double(store.numel()) - expert_values) * sizeof(float);
  // (ZeRO-2: the reduce-scatter half every micro-batch, the all-gather half once. ZeRO-3:
  // the reduce-scatter half every micro-batch, and the all-gather half about twice a
  // micro-batch, a forward's and a backward's, or once a step where the gathered
  // parameters are kept; with a prefetch a unit's gather runs under the previous unit's
  // computation, so only each pass's first unit waits, and what the passes' computation
  // cannot cover)
  Traffic dense_sum;  // one all-reduce, or node by node the three parts over the two link levels
  replica_sum_traffic(dense_sum, replicas, links.node_sum(), int64_t(grads) / int64_t(sizeof(float)), sizeof(float),
                      gradient_matrices(store));
  const double all_reduce =
      links.seconds(dense_sum, [](const std::string&, const std::string&) { return true; }) +
      links.of("expert_data").seconds(Collective::AllReduce, replicas / e, expert_values * sizeof(float)) +
      links.codec_seconds(int64_t(grads) / int64_t(sizeof(float)));  // (the codec runs in the sum)
  const double m = double(l.micro_batches);
  double data_sum = all_reduce * (l.zero == 2 ? (m + 1) / 2.0 : 1.0);
  if (l.zero == 3) {
    const GatherPolicy policy = gather_policy(deck.parallel);
    const double passes = policy.keep ? 1.0 : 2.0 * m;
    const double gathers = all_reduce / 2 * passes;
    const double first = gathers / double(model.placement().held_layers() + 2);  // a pass's first unit's
    const double exposed = policy.prefetch > 0 ? first + std::max(0.0, gathers - first - m * c.compute) : gathers;
    data_sum = all_reduce / 2 * m + exposed;
  }
  if (p == 1) {
    // with NCCL, buckets reduce during the backward and at least the last one is left
    // after it; with MPI they all run after it (Comm::start_allreduce_sum)
    int64_t buckets = 0;
    for (const auto& [key, e] : round.entries())
      if (key.second == "allreduce_overlapped") buckets = e.calls;
    const bool overlaps =
        buckets > 0 && deck.parallel.comm_backend == CommBackend::Nccl;  // with the last micro-batch's
    c.sums = overlaps ? std::max(data_sum - c.backward(), data_sum / double(buckets)) : data_sum;
  } else if (!xpipe) {
    const double wte = double(store.infos()[model.params().table().tied_index()].numel) * sizeof(float);
    const double tied = s == 0 || s == p - 1 ? links.of("tied_emb").seconds(Collective::AllReduce, 2, wte) : 0.0;
    c.sums = tied + data_sum;
  } else {
    c.sums = data_sum;  // XPipe sums and updates inside the stream, at OptimizerStep
    c.optimizer += data_sum;
  }
}

// The pipeline simulation's per-stage costs (pc) and the busiest stage's computation and
// communication (out); returns the longest sums and update after a flush.
double busiest_stage(StepPrediction& out, PipeCosts& pc, const std::vector<StageCosts>& costs, const Layout& l,
                     bool predicts) {
  const bool xpipe = l.schedule == Schedule::XPipe;
  double after = 0;
  for (const auto& c : costs) {
    pc.stage_forward.push_back(c.forward());
    pc.stage_backward.push_back(c.backward());
    pc.stage_weight_half.push_back(std::min(c.weight_half, c.backward()));
    pc.optimizer = std::max(pc.optimizer, c.optimizer);
    if (predicts) pc.stage_predict.push_back(c.predict);
    const double m = double(l.micro_batches);
    after = std::max(after, xpipe ? 0.0 : c.after());
    if (m * c.compute + c.optimizer > out.compute_s) {  // the busiest stage's
      out.compute_s = m * c.compute + c.optimizer - (xpipe ? c.sums : 0.0);
      out.comm_s = m * c.tensor + c.sums;
    }
  }
  return after;
}

// The lists a pipelined layout's stages run: a flushing schedule's one mini-batch, or two
// XPipe streams of k1 and k2 mini-batches whose difference is its steady state (a third,
// of stream_steps, when asked for).
struct StageLists {
  PipeSchedule flush, shorter, longer, asked;
  int k1 = 0, k2 = 0, stream_steps = 0;
  bool xpipe = false;
  const PipeSchedule& unit() const { return xpipe ? (stream_steps > 0 ? asked : shorter) : flush; }  // sizes the slots
};
StageLists stage_lists(const Layout& l, int stream_steps) {
  StageLists out;
  const int p = l.pipeline;
  out.xpipe = p > 1 && l.schedule == Schedule::XPipe;
  out.k1 = p + 1, out.k2 = 2 * p + 2, out.stream_steps = stream_steps;
  if (p > 1 && !out.xpipe) out.flush = schedule_of(l, 1);
  if (out.xpipe) {
    out.shorter = schedule_of(l, out.k1);
    out.longer = schedule_of(l, out.k2);
    if (stream_steps > 0) out.asked = schedule_of(l, stream_steps);
  }
  return out;
}

// The step of p >= 2 stages: the flushing schedule simulated, then the sums and update
// (`after`); XPipe's stream as asked, or its steady state (the longer stream less the shorter).
void time_pipeline(StepPrediction& out, const PipeCosts& pc, const StageLists& lists, int p, double after) {
  if (!lists.xpipe) {
    const PipeSimulation sim = simulate_schedule(lists.flush, pc);
    out.bubble = sim.bubble_fraction();
    out.step_s = sim.makespan + after;
  } else if (lists.stream_steps > 0) {
    const PipeSimulation sim = simulate_schedule(lists.asked, pc);
    out.step_s = sim.makespan / double(lists.stream_steps);
    out.bubble = sim.bubble_fraction();
  } else {
    const PipeSimulation a = simulate_schedule(lists.shorter, pc), b = simulate_schedule(lists.longer, pc);
    const double streams = double(lists.k2 - lists.k1);
    out.step_s = (b.makespan - a.makespan) / streams;
    double busy = 0;
    for (int s = 0; s < p; ++s) busy += (b.busy[size_t(s)] - a.busy[size_t(s)]) / streams;
    out.bubble = std::max(0.0, 1.0 - busy / (double(p) * out.step_s));
  }
}

}  // namespace

// (75 lines: one pass over the stages, each stage's costs, traffic and memory in turn, then
// the timeline; the pieces are the functions above.)
StepPrediction predict_step(const Deck& deck_asked, const Layout& l, const MachineFile& machine, int stream_steps,
                            DryModels* models) {
  if (l.mgrit()) return predict_layer_parallel(deck_asked, l, machine, models);
  // where the machine's bf16 products round inside the product (GPUs), a run there keeps
  // no bf16 copies or activations, whatever this build does: planned as if rounding once
  // were off
  Deck deck = deck_asked;
  if (machine.bf16_rounds_in_product) deck.model.bf16_round_once = false;
  StepPrediction out;
  out.layout = l;
  const Links links(l, machine);
  const int p = l.pipeline;
  const bool xpipe = p > 1 && l.schedule == Schedule::XPipe;
  const int64_t local_batch = deck.data.batch_size / l.data;
  const BlockContext micro{local_batch / l.micro_batches, deck.model.seq_len};
  const StageLists lists = stage_lists(l, stream_steps);
  const PipeSchedule& unit = lists.unit();

  std::vector<StageCosts> costs(static_cast<size_t>(p));
  double transfer = 0, tied_transfer = 0;
  for (int s = 0; s < p; ++s) {
    // the loss layer's cache kept once where the stage's list allows it, as the engines
    // decide it (stage_memory): its bytes count in the work below
    const bool shared_head = p > 1 && one_forward_at_a_time(unit.programs[size_t(s)]);
    const auto model = dry_model(models, deck, l, s);
    const auto& store = model->params();
    StageCosts& c = costs[size_t(s)];
    if (s == 0) out.model_flops = model->flops_per_token() * double(deck.data.batch_size) * double(deck.model.seq_len);
    micro_batch_costs(c, deck, l, s, machine, links, micro, *model, shared_head, models);
    if (p > 1) {
      const auto [rows, cols] = model->boundary_shape(micro);
      transfer = links.of("pipeline").seconds(Collective::Send, p, double(rows * cols) * sizeof(float));
      const double wte = double(store.infos()[model->params().table().tied_index()].numel) * sizeof(float);
      if (s == 0) tied_transfer = links.of("tied_emb").seconds(Collective::Send, 2, wte);
    }
    // per step
    const int replicas = l.replicas();
    const NodeSum node_sum = links.node_sum();
    const Traffic round = p == 1
                              ? data_parallel_traffic(*model, replicas, deck.parallel.grad_bucket_mb * 1e6, local_batch,
                                                      l.micro_batches, l.zero, gather_policy(deck.parallel), node_sum)
                              : pipeline_traffic(*model, xpipe ? lists.longer : lists.flush, replicas, local_batch,
                                                 l.zero, gather_policy(deck.parallel), node_sum);
    double wire = round.wire_bytes();
    if (xpipe)
      wire = (wire - pipeline_traffic(*model, lists.shorter, replicas, local_batch).wire_bytes()) /
             double(lists.k2 - lists.k1);
    out.wire_bytes = std::max(out.wire_bytes, wire);
    out.stage_traffic.push_back(round);
    out.stage_params.push_back(store.numel());
    step_sums(c, deck, l, s, links, *model, round);
    const auto [state, activations] =
        stage_memory(*model, p > 1 ? &unit : nullptr, micro, xpipe, zero_shards(l), l.zero, l.micro_batches,
                     keeps_rounded_copy(deck), gather_policy(deck.parallel), l.dispatch, int(l.dispatch_in_flight));
    out.stage_state.push_back(state);
    if (state + activations > out.memory_bytes()) {
      out.state_bytes = state;
      out.activation_bytes = activations;
    }
  }

  if (p == 1) {  // micro-batches one after the other (gradient accumulation), then the sums
    const auto& c = costs[0];
    const double m = double(l.micro_batches);
    out.compute_s = m * c.compute + c.optimizer;
    out.comm_s = m * c.tensor + c.sums;
    out.step_s = out.compute_s + out.comm_s;
    return out;
  }
  PipeCosts pc;
  pc.transfer = transfer;
  pc.tied_grad_transfer = tied_transfer;
  pc.tied_weights_transfer = 3 * tied_transfer;  // the weights and both moments, one message each
  const double after = busiest_stage(out, pc, costs, l, xpipe && deck.parallel.weight_prediction);
  time_pipeline(out, pc, lists, p, after);
  return out;
}
}  // namespace strata
