#include "engine/make_engine.hpp"

#include "core/error.hpp"
#include "engine/data_parallel.hpp"
#include "engine/layer_parallel/layer_parallel.hpp"
#include "engine/pipeline/pipeline_engine.hpp"
#include "engine/pipeline/xpipe_engine.hpp"

namespace strata {
namespace {

std::unique_ptr<TrainEngine<float>> make_mgrit(const Deck& deck, const Grid& grid, StageModel<float>& model) {
  if (!model.ode_network())
    throw UserError(
        "parallel.schedule = \"mgrit\" needs a model whose layers are ODE steps (model.kind = \"resnet\" or \"gpt\")");
  const auto& lp = deck.layerpar;
  LayerParallelOptions o;
  o.forward.levels = o.backward.levels = int(deck.parallel.mgrit_levels);
  o.forward.cfactor = o.backward.cfactor = int(lp.cfactor);
  o.forward.tolerance = o.backward.tolerance = lp.tolerance;
  o.forward.fcf = o.backward.fcf = lp.relaxation == Relaxation::FCF;
  o.forward.max_iterations = int(lp.fwd_iterations);
  o.backward.max_iterations = int(lp.bwd_iterations);
  o.warm_start = lp.warm_start;
  o.control = lp.control;
  o.check_every = lp.check_every;
  o.max_gradient_error = lp.max_gradient_error;
  o.control_after = deck.optim.warmup_steps;
  return std::make_unique<LayerParallel<float>>(model, grid, deck.data.batch_size / grid.data_size(), o);
}

}  // namespace

std::unique_ptr<TrainEngine<float>> make_engine(const Deck& deck, const Grid& grid, StageModel<float>& model,
                                                StalenessMeter<float>* staleness) {
  const auto& par = deck.parallel;
  if (par.mgrit()) return make_mgrit(deck, grid, model);
  if (par.schedule == Schedule::XPipe && par.pipeline > 1)
    return std::make_unique<XPipeEngine<float>>(model, grid, int(par.micro_batches), par.weight_prediction, staleness);
  if (par.pipeline > 1)
    return std::make_unique<PipelineEngine<float>>(model, grid, par.schedule, int(par.micro_batches),
                                                   deck.variability);
  return std::make_unique<DataParallel<float>>(model, grid.replicas(), grid.expert_replicas(), par.grad_bucket_mb * 1e6,
                                               int(par.micro_batches));
}

}  // namespace strata
