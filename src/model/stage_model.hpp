#pragma once
// StageModel: what an engine asks of the part of a model this rank holds (a pipeline
// stage, or the whole model), whatever the model. Its interface comes in three parts, one
// concern each: StageUnits (state/stage_units.hpp: the ranges ZeRO's units are made of),
// StageFootprint (model/stage_footprint.hpp: what the planner reads, declarations only) and
// this one (training: caches, forward, the backward's halves; evaluation: the samples a
// classifier got right). Engines (data parallel, the pipeline executor, MGRIT) are
// written against StageModel alone, the planner against StageFootprint; the GPT, the
// residual network and the softmax regression implement it.
//
// A stage knows its parameters (declared in a ParamStore, this rank's shards), runs one
// micro-batch forward and backward with activation caches the engine owns (as many as the
// schedule keeps in flight), says what it passes to the next stage (boundary_shape,
// output, input_grad) and what it sends on its own (micro_batch_traffic). The loss is a
// sum of terms, targets_per_sample() per sample (the tokens of a sequence, or one label);
// engines scale the backward by 1 / (global samples x targets_per_sample()), so the
// gradient is that of the global mean loss on any layout.
//
// The backward comes in two halves: backward_input (the gradient of the stage's input,
// which the previous stage waits for) and backward_weight (the parameters' gradients,
// which can wait; zero-bubble schedules run it later). backward() runs both.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "model/block_context.hpp"
#include "model/stage_footprint.hpp"
#include "state/param_store.hpp"

namespace strata {

// The activations one micro-batch keeps between its forward and backward on a stage.
// Made by the model (make_cache), held by the engine, read only by the model.
class StageCache {
 public:
  virtual ~StageCache() = default;
  virtual int64_t bytes() const = 0;  // as allocated so far
};

// A micro-batch (or a replica's batch) as the model reads it: the first stage reads
// token ids (language models) or feature rows (images); the last reads the targets.
template <class T>
struct SampleBatch {
  int64_t samples = 0;
  V1<const int32_t> tokens;   // samples x targets_per_sample token ids, or empty
  V2<const T> features;       // (samples, features), or empty
  V1<const int32_t> targets;  // samples x targets_per_sample
  // samples [begin, end): rows of features, per_sample entries of tokens and targets each
  SampleBatch slice(int64_t begin, int64_t end, int64_t per_sample) const {
    SampleBatch s;
    s.samples = end - begin;
    const auto flat = std::make_pair(begin * per_sample, end * per_sample);
    if (tokens.extent(0) > 0) s.tokens = Kokkos::subview(tokens, flat);
    if (features.extent(0) > 0) s.features = Kokkos::subview(features, std::make_pair(begin, end), Kokkos::ALL);
    s.targets = Kokkos::subview(targets, flat);
    return s;
  }
};

template <class T>
class OdeNetwork;

// What an engine runs: the stage's forward and backward of one micro-batch at a time.
template <class T>
class StageModel : public StageFootprint<T> {
 public:
  // Called during the backward with a range [offset, offset + count) of the flat gradient
  // buffer as soon as it is final, so a driver can start reducing it while the backward
  // goes on. Ranges arrive from the end of the buffer towards its start, each adjacent to
  // the one before (grad_ready_order lists them).
  using GradReadyFn = std::function<void(int64_t offset, int64_t count)>;
  using StageFootprint<T>::params;

  virtual ParamStore<T>& params() = 0;
  // The stage as ODE steps (ode_network.hpp), which layer-parallel training solves across
  // ranks; nullptr for a model whose layers are not, or that runs without them. The steps
  // know the model and the model does not know them: whoever builds a model for
  // layer-parallel training attaches them (the kind's maker; gpt_layer_steps.hpp,
  // resnet_steps.hpp).
  OdeNetwork<T>* ode_network() { return ode_network_.get(); }
  void attach_ode_network(std::unique_ptr<OdeNetwork<T>> steps) { ode_network_ = std::move(steps); }

  // A cache for one micro-batch on the stage's chunk `chunk` (interleaved schedules: the
  // stage holds several parts of the model; the cache says which one its passes run).
  virtual std::unique_ptr<StageCache> make_cache(int chunk = 0) const = 0;
  // Forward of one micro-batch (ctx.batch samples of batch, the replica's rows of it)
  // through this stage. input: the previous stage's output (empty on the first stage),
  // which must outlive the backward. Returns the sum of the loss terms on the last stage
  // (the same on every rank of the tensor group), 0 elsewhere.
  virtual double forward(const BlockContext& ctx, const SampleBatch<T>& batch, V2<const T> input,
                         StageCache& cache) = 0;
  // What the forward that filled cache passes to the next stage (boundary_shape).
  virtual V2<const T> output(const StageCache& cache) const = 0;

  // dloss_scale: dL/d(one loss term). dout: the gradient of output() (empty on the last
  // stage). Leaves the gradient of the stage's input for input_grad() (not on the first
  // stage) and accumulates the parameters' gradients, handing each range of them to
  // on_ready once final (grad_ready_order).
  void backward(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache,
                const GradReadyFn& on_ready = {}) {
    run_backward(ctx, dloss_scale, dout, cache, on_ready);
  }
  // The same in two halves, for schedules that run them apart (zero-bubble pipelines):
  // backward_input leaves the input's gradient (input_grad()) and keeps in the cache what
  // backward_weight needs (StageMemory::weight_pass); backward_weight then accumulates the
  // parameters' gradients (some cheap ones may come with the input half) and hands on
  // their ranges. Their sum is the same, bit for bit, as backward()'s.
  virtual void backward_input(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache) = 0;
  virtual void backward_weight(const BlockContext& ctx, StageCache& cache, const GradReadyFn& on_ready) = 0;
  virtual V2<const T> input_grad(const StageCache& cache) const = 0;

  // The engine's promise that this stage runs each micro-batch's backward (or input half)
  // before the next forward (one_forward_at_a_time): a model may then keep what its loss
  // layer needs (the GPT's logits) once for all caches rather than in each
  // (StageMemory::shared_cache, which memory_for counts with loss_cache_shared).
  virtual void share_loss_layer_cache(bool) {}
  // The loss layer's cache kept once for all micro-batches (share_loss_layer_cache), as allocated.
  virtual int64_t shared_cache_bytes() const { return 0; }

  // Evaluation of classifiers: the samples of a micro-batch the forward that filled cache
  // (on the last stage) predicted right; engines sum them like the loss when counts_correct().
  virtual bool counts_correct() const { return false; }
  virtual int64_t correct(const StageCache&) const { return 0; }
  // Buffers the stage keeps from one call to the next, shared by its micro-batches and its
  // layers: the bf16 products' (ParamStore::product_workspace) and the model's own
  // (layer_workspace_bytes: the context split's exchange buffers, the backward's scratch),
  // as allocated so far (for ctx: StageMemory::workspace). Counted with the activations by
  // the run and the planner.
  int64_t workspace_bytes() const { return params().product_workspace().bytes() + layer_workspace_bytes(); }

 protected:
  virtual int64_t layer_workspace_bytes() const { return 0; }
  // backward(): both halves; models interleave them layer by layer (so that a driver's
  // reductions start early) where the halves cannot keep a whole stage's operands.
  virtual void run_backward(const BlockContext& ctx, T dloss_scale, V2<const T> dout, StageCache& cache,
                            const GradReadyFn& on_ready) {
    backward_input(ctx, dloss_scale, dout, cache);
    backward_weight(ctx, cache, on_ready);
  }

 private:
  std::shared_ptr<OdeNetwork<T>> ode_network_;  // attach_ode_network (shared: the type is incomplete here)
};

}  // namespace strata
