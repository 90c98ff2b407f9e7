#include "plan/dry_models.hpp"

#include "model/gpt.hpp"
#include "model/make_model.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {
namespace {

// The stage's model as the run would build it (make_model), without memory: a GPT (the
// planner plans GPT decks).
std::unique_ptr<GPT<float>> build_dry_model(const Deck& deck, const Layout& l, int stage) {
  ContextParallel cp;  // context rank 0: the zigzag split gives every rank the same work
  cp.size = int(l.context);
  cp.all_to_all = l.context_mode == ContextMode::AllToAll;
  ExpertParallel ep;  // expert rank 0 of data rank 0: every expert rank holds as many
  ep.size = int(expert_ranks(l));  // 1D and 3D: tensor ranks too
  ep.data_size = int(l.data);
  ep.token_ranks = int(l.replicas());
  return as_gpt(make_model(with_layout(deck, l), tensor_split_of(l), stage, {}, false, cp, ep));
}

}  // namespace

DryModels::DryModels() = default;
DryModels::~DryModels() = default;

std::shared_ptr<GPT<float>> DryModels::get(const Deck& deck, const Layout& l, int stage) {
  Layout shape = l;
  shape.micro_batches = 1;
  shape.zero = 0;
  const std::string key = plan_name(shape) + " stage " + std::to_string(stage) + " " + to_string(deck.model.precision) +
                          (deck.model.bf16_round_once ? " once" : " every");
  // the layouts of one shape come one after another (feasible_layouts): 64
  // models at most are kept (each holds its parameters' descriptions; an 80B GPT's about 12 MB)
  constexpr size_t kMostModels = 64;
  if (models_.size() >= kMostModels && !models_.count(key)) models_.clear();
  auto& slot = models_[key];
  if (!slot) slot = build_dry_model(deck, shape, stage);
  return slot;
}

std::shared_ptr<GPT<float>> dry_model(DryModels* models, const Deck& deck, const Layout& l, int stage) {
  if (models) return models->get(deck, l, stage);
  return build_dry_model(deck, l, stage);
}

}  // namespace strata

