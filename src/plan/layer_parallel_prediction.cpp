#include "plan/layer_parallel_prediction.hpp"

#include <algorithm>

#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "plan/dry_models.hpp"
#include "plan/engine_traffic.hpp"
#include "plan/links.hpp"
#include "plan/stage_costs.hpp"

namespace strata {
namespace {

// Layer-parallel training (parallel.schedule = "mgrit", engine/layer_parallel/): the layer
// ranks' solves replayed (mgrit_cost.hpp) with one block's times from a layer rank's
// model: its products at the GEMM rate, its kept bytes at the activation rate and its
// tensor traffic, a third for the forward step, two for the adjoint step (its forward
// again and its input half), all three for the gradient pass; the open and close parts
// (buffer blocks, embedding, head) likewise, one state (B T, C) per message over the
// pipeline link; every check_every steps an exact pass on top; then the tied embedding's
// and the replicas' gradient sums and the update. Memory: the layer rank's parameters,
// gradients and moments, the solvers' states on every level, one block's activations and
// the open and close parts' caches.
struct LayerParallelCosts {
  LayerStepTimes times;
  MgritOptions forward, backward;
  int64_t steps = 0;
  double solve_s = 0;      // one pass, with the checks' share
  double state_bytes = 0;  // of one state
};

MgritOptions solver_options(const LayerParConfig& lp, int levels, int iterations) {
  MgritOptions o;
  o.levels = levels;
  o.cfactor = int(lp.cfactor);
  o.max_iterations = iterations;
  o.tolerance = 0;  // every cycle runs (the tolerance may stop them earlier)
  o.fcf = lp.relaxation == Relaxation::FCF;
  return o;
}

// the states a forward and adjoint pair of solvers keeps on layer rank r (engine/layer_parallel/mgrit.hpp):
// each its points (and above level 0 their FAS right-hand sides and restricted values) and one scratch state,
// and the gradient pass's one (OdeAdjointSteps)
int64_t solver_states(const MgritLayout& layout, int r) {
  int64_t n = 1;
  for (int l = 0; l < layout.levels(); ++l) n += (l == 0 ? 1 : 3) * (layout.count(l, r) + 1);
  return n;
}

LayerParallelCosts layer_parallel_costs(const Deck& deck, const Layout& l, const MachineFile& machine,
                                        DryModels* models) {
  const auto& lp = deck.layerpar;
  const Links links(l, machine);
  const int p = l.pipeline;
  const BlockContext micro{deck.data.batch_size / l.data, deck.model.seq_len};
  LayerParallelCosts c;
  c.steps = deck.model.n_layer - lp.buffer_open - lp.buffer_close;
  c.forward = solver_options(lp, l.mgrit_levels, int(lp.fwd_iterations));
  c.backward = solver_options(lp, l.mgrit_levels, int(lp.bwd_iterations));
  // a forward and backward of the chunk's blocks and parts: products, kept bytes, tensor traffic
  const auto chunk_seconds = [&](const GPT<float>& model, int chunk) {
    Traffic tensor;
    model.micro_batch_traffic(micro, tensor, chunk);
    return double(model.memory_for(micro, chunk).cache) / machine.activation_rate +
           links.seconds(tensor, [](const std::string&, const std::string&) { return true; });
  };
  // one block: layer rank 0's step chunk (its products over all it holds, shared by its blocks)
  const auto first = dry_model(models, deck, l, 0);
  const auto& place = first->placement();
  const int held = place.held_layers(),
            in_steps = place.chunk(place.steps_chunk()).second - place.chunk(place.steps_chunk()).first;
  const double block_products = product_seconds(*first, micro, machine, deck.model.precision) / double(held);
  const double block = block_products + chunk_seconds(*first, place.steps_chunk()) / double(in_steps);
  c.times.forward = block / 3;
  c.times.adjoint = 2 * block / 3;
  c.times.gradient = c.times.serial_step = block;
  c.times.open = double(lp.buffer_open) * block_products + chunk_seconds(*first, 0);
  const auto last = dry_model(models, deck, l, p - 1);
  const int last_chunk = last->placement().chunk_count() - 1;
  const double head_products = product_seconds(*last, micro, machine, deck.model.precision) -
                               double(last->placement().held_layers()) * block_products;
  c.times.close = head_products + chunk_seconds(*last, last_chunk) + double(lp.buffer_close) * block_products;
  const auto [rows, cols] = first->boundary_shape(micro);
  c.state_bytes = double(rows * cols) * sizeof(float);
  c.times.message = links.of("pipeline").seconds(Collective::Send, p, c.state_bytes);
  c.solve_s = layer_parallel_seconds(c.steps, p, c.forward, c.backward, c.times);
  const MgritOptions exact_f = solver_options(lp, 1, 1), exact_b = exact_f;
  if (lp.check_every > 0 && l.mgrit_levels > 1)
    c.solve_s += layer_parallel_seconds(c.steps, p, exact_f, exact_b, c.times) / double(lp.check_every);
  return c;
}

// Per layer rank, the states its solvers keep: forward and adjoint, the gradient pass's one (and the checks'
// one-level set).
std::vector<int64_t> solver_state_counts(const Deck& deck, const Layout& l) {
  const auto& lp = deck.layerpar;
  const int p = l.pipeline;
  const int64_t steps = deck.model.n_layer - lp.buffer_open - lp.buffer_close;
  const auto bounds = MgritLayout::balanced(steps, p);
  const MgritLayout fwd(steps, int(lp.cfactor), l.mgrit_levels, bounds);
  const MgritLayout bwd = fwd.reversed();
  const MgritLayout one(steps, int(lp.cfactor), 1, bounds);
  std::vector<int64_t> out;
  for (int r = 0; r < p; ++r) {
    int64_t n = solver_states(fwd, r) + solver_states(bwd, p - 1 - r) + 1;
    if (lp.check_every > 0 && l.mgrit_levels > 1) n += 2 * solver_states(one, r) + 1;
    out.push_back(n);
  }
  return out;
}

}  // namespace

// The fullest layer rank's (state, activation) bytes: its parameters, gradients and moments;
// the open and close parts' caches, one block's activations, the solvers' states (and a
// check's gradient copy).
MemoryPrediction layer_parallel_memory(const Deck& deck, const Layout& l, DryModels* models) {
  const BlockContext micro{deck.data.batch_size / l.data, deck.model.seq_len};
  const std::vector<int64_t> states = solver_state_counts(deck, l);
  MemoryPrediction out;
  for (int s = 0; s < l.pipeline; ++s) {
    const auto model = dry_model(models, deck, l, s);
    const auto& place = model->placement();
    const int steps_chunk = place.steps_chunk(),
              in_steps = place.chunk(steps_chunk).second - place.chunk(steps_chunk).first;
    const auto [rows, cols] = model->boundary_shape(micro);
    const int64_t state = stage_memory(*model, nullptr, micro, false, zero_shards(l), l.zero, 1,
                                       keeps_rounded_copy(deck), gather_policy(deck.parallel))
                              .first;
    const StageMemory steps_memory = model->memory_for(micro, steps_chunk);
    int64_t activations = steps_memory.cache / std::max(1, in_steps) + steps_memory.workspace +
                          states[size_t(s)] * rows * cols * int64_t(sizeof(float));
    for (int k = 0; k < place.chunk_count(); ++k)
      if (k != steps_chunk) activations += model->memory_for(micro, k).cache;
    if (deck.layerpar.check_every > 0 && l.mgrit_levels > 1)
      activations += model->params().numel() * int64_t(sizeof(float));
    if (state + activations > out.state_bytes + out.activation_bytes) {
      out.state_bytes = state;
      out.activation_bytes = activations;
    }
  }
  return out;
}

StepPrediction predict_layer_parallel(const Deck& deck, const Layout& l, const MachineFile& machine,
                                      DryModels* models) {
  StepPrediction out;
  out.layout = l;
  const Links links(l, machine);
  const int p = l.pipeline;
  const LayerParallelCosts c = layer_parallel_costs(deck, l, machine, models);
  double sums = 0, optimizer = 0;
  for (int s = 0; s < p; ++s) {
    const auto model = dry_model(models, deck, l, s);
    const auto& store = model->params();
    if (s == 0) out.model_flops = model->flops_per_token() * double(deck.data.batch_size) * double(deck.model.seq_len);
    const double grads = double(store.numel()) * sizeof(float);
    double rank_sums = links.of("data").seconds(Collective::AllReduce, l.replicas(), grads);
    if (p > 1 && (s == 0 || s == p - 1))
      rank_sums += links.of("tied_emb")
                       .seconds(Collective::AllReduce, 2,
                                double(store.infos()[model->params().table().tied_index()].numel) * sizeof(float));
    sums = std::max(sums, rank_sums);
    optimizer = std::max(optimizer, double(zero_block(store.numel(), zero_shards(l))) / machine.adam_rate);
    out.stage_params.push_back(store.numel());
  }
  const MemoryPrediction memory = layer_parallel_memory(deck, l, models);
  out.state_bytes = memory.state_bytes;
  out.activation_bytes = memory.activation_bytes;
  out.compute_s = c.solve_s + optimizer;
  out.comm_s = sums;
  out.step_s = out.compute_s + out.comm_s;
  // the busiest rank's messages (forward and adjoint solves) and its gradient sum
  const LayerParallelSolves solves = planned_solves(deck, l);
  int64_t messages = 0;
  for (int r = 0; r < p; ++r)
    messages = std::max(messages, solves.forward.messages[size_t(r)] + solves.adjoint.messages[size_t(r)]);
  out.wire_bytes = double(messages) * c.state_bytes +
                   (l.replicas() > 1 ? 2.0 * double(out.stage_params.front()) * sizeof(float) : 0.0);
  return out;
}

LayerParallelSolves planned_solves(const Deck& deck, const Layout& l) {
  const auto& lp = deck.layerpar;
  const int p = l.pipeline;
  const int64_t steps = deck.model.n_layer - lp.buffer_open - lp.buffer_close;
  const MgritOptions f = solver_options(lp, l.mgrit_levels, int(lp.fwd_iterations)),
                     b = solver_options(lp, l.mgrit_levels, int(lp.bwd_iterations));
  const MgritLayout fwd(steps, f.cfactor, f.levels, MgritLayout::balanced(steps, p));
  LayerParallelSolves out{mgrit_cost(fwd, f, 1, 1), mgrit_cost(fwd.reversed(), b, 1, 1)};
  // the adjoint runs on the reversed layout: its position p - 1 - r is layer rank r
  std::reverse(out.adjoint.steps.begin(), out.adjoint.steps.end());
  std::reverse(out.adjoint.messages.begin(), out.adjoint.messages.end());
  return out;
}

}  // namespace strata
