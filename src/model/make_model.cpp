#include "model/make_model.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/gpt.hpp"
#include "model/resnet.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {
namespace {

std::unique_ptr<StageModel<float>> make_gpt(const Deck& deck, const TensorParallel& tp, const ContextParallel& cp,
                                            const ExpertParallel& ep, int stage, bool allocate) {
  const auto& par = deck.parallel;
  const auto placement = StagePlacement::interleaved(
      int(deck.model.n_layer), int(par.pipeline), par.schedule == Schedule::Interleaved ? int(par.virtual_stages) : 1,
      stage);
  return std::make_unique<GPT<float>>(deck.model, deck.run.seed, tp, placement, par.recompute, allocate, cp, ep);
}

std::unique_ptr<StageModel<float>> make_resnet(const Deck& deck, int stage, const DataShape& data) {
  ResNetConfig rc;
  rc.inputs = data.features;
  rc.width = deck.model.width;
  rc.channels = deck.model.channels;
  rc.steps = deck.model.steps;
  rc.classes = data.classes;
  rc.t_final = deck.model.t_final;
  rc.init_std = deck.model.init_std;
  rc.step_init_std = deck.model.step_init_std;
  rc.precision = deck.model.precision;
  rc.recompute_states = deck.parallel.recompute == Recompute::Full;
  return std::make_unique<ResNet<float>>(rc, deck.run.seed,
                                         StagePlacement::balanced(int(rc.steps), int(deck.parallel.pipeline), stage));
}

}  // namespace

void require_precision_runs(Precision precision) {
  if (precision == Precision::BF16)
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty())
      throw UserError("model.precision = \"bf16\" cannot run here: " + why + " (use \"fp32\")");
}

std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const TensorParallel& tp, int stage,
                                              const DataShape& data, bool allocate, const ContextParallel& cp,
                                              const ExpertParallel& ep) {
  std::unique_ptr<StageModel<float>> model;
  if (deck.model.kind == ModelKind::ResNet) {
    if (!allocate) throw std::logic_error("make_model: the residual network has no dry model");
    model = make_resnet(deck, stage, data);
  } else {
    model = make_gpt(deck, tp, cp, ep, stage, allocate);
  }
  if (allocate) {
    kernels::RoundedCopy::set_enabled(deck.model.bf16_round_once);
    if (keeps_rounded_copy(deck)) model->params().keep_rounded_copy();
  }
  return model;
}

bool keeps_rounded_copy(const Deck& deck) {
  return deck.model.precision == Precision::BF16 && deck.model.bf16_round_once && ParamStore<float>::rounded_copy_pays();
}

std::unique_ptr<GPT<float>> as_gpt(std::unique_ptr<StageModel<float>> model) {
  auto* gpt = dynamic_cast<GPT<float>*>(model.get());
  if (!gpt) throw std::logic_error("as_gpt: the model is not a GPT");
  model.release();
  return std::unique_ptr<GPT<float>>(gpt);
}

std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const Grid& grid, const DataShape& data) {
  require_precision_runs(deck.model.precision);
  std::unique_ptr<StageModel<float>> model =
      make_model(deck, tensor_parallel_of(grid), grid.coords().pipeline, data, true, context_parallel_of(grid),
                 expert_parallel_of(grid));
  // parallel.zero = 1 with more than one replica: this rank keeps the AdamW moments of its
  // replica's block only (optim/zero_sharding.hpp), before any step or checkpoint read
  // (with expert parallelism the experts' moments over the expert replicas)
  if (deck.parallel.zero > 0 && grid.replicas().size() > 1) {
    const bool experts = grid.shape().expert > 1;
    model->params().shard_moments(grid.replicas().size(), grid.replicas().rank(),
                                  experts ? grid.expert_replicas().size() : 0, experts ? grid.expert_replicas().rank() : 0);
  }
  return model;
}

}  // namespace strata
