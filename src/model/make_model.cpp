#include "model/make_model.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/gemm_probe.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/gpt.hpp"
#include "parallel/tensor_parallel.hpp"
#include "state/rank_state.hpp"

namespace strata {

RunDescription describe_model(const Deck& deck, StageModel<float>& model, const RunSetting& run) {
  return model_kind_of(deck).describe(deck, model, run);  // the kind make_model built for this deck
}

std::vector<std::array<int64_t, 3>> model_product_shapes(const Deck& deck) {
  return model_kind_of(deck).product_shapes(deck);
}

double model_gemm_rate(const Deck& deck, Precision precision, double seconds_each, int64_t most_calls,
                       std::vector<std::pair<std::string, double>>* each) {
  return gemm_rate_at(model_product_shapes(deck), precision, seconds_each, most_calls, each);
}

void require_precision_runs(Precision precision) {
  if (precision == Precision::BF16)
    if (const std::string why = kernels::bf16_products_unavailable(); !why.empty())
      throw UserError("model.precision = \"bf16\" cannot run here: " + why + " (use \"fp32\")");
}

std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const TensorParallel& tp, int stage,
                                              const DataShape& data, bool allocate, const ContextParallel& cp,
                                              const ExpertParallel& ep) {
  const ModelKind& kind = model_kind_of(deck);
  if (!allocate && !kind.dry_models)
    throw std::logic_error("make_model: model.kind = \"" + kind.name + "\" has no dry model");
  std::unique_ptr<StageModel<float>> model = kind.make(deck, {tp, stage, data, allocate, cp, ep});
  if (allocate && keeps_rounded_copy(deck)) model->params().keep_rounded_copy();
  return model;
}

bool keeps_rounded_copy(const Deck& deck) {
  return deck.model.precision == Precision::BF16 && deck.model.bf16_round_once && deck.parallel.zero < 3 &&
         ParamStore<float>::rounded_copy_pays();  // (ZeRO-3 keeps no flat parameters to copy)
}

std::unique_ptr<GPT<float>> as_gpt(std::unique_ptr<StageModel<float>> model) {
  auto* gpt = dynamic_cast<GPT<float>*>(model.get());
  if (!gpt) throw std::logic_error("as_gpt: the model is not a GPT");
  model.release();
  return std::unique_ptr<GPT<float>>(gpt);
}

std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const Grid& grid, const DataShape& data) {
  require_precision_runs(deck.model.precision);
  // The BLAS library's buffers before the model's (OpenBLAS takes ~128 MiB per thread at its
  // first product): under a memory limit that leaves no room for them OpenBLAS retried its
  // failing allocation forever (seen under prlimit --data, MPICH's UCX hooking malloc),
  // where a failing allocation of the model's is exit 6 with one line.
  measure_gemm_gflops(64, 64, 64, 0.0, deck.model.precision);
  // A store the ZeRO stages will shard is built with its parameters only, where the kind can
  // build a model without memory: the sharding allocates the rest, so no rank ever holds the
  // unsharded gradients and moments (under ZeRO-3 nor the whole parameters: each rank draws
  // its parts of the initial values). With model.init_from every value is read from the file
  // (a tensor missing there is refused), so none is drawn: a 124M GPT's drawing took seconds.
  const bool read = !deck.model.init_from.empty();
  const bool bare = (state_sharded(deck.parallel, grid) || read) && model_kind_of(deck).dry_models;
  std::unique_ptr<StageModel<float>> model = make_model(deck, tensor_parallel_of(grid), grid.coords().pipeline, data,
                                                        !bare, context_parallel_of(grid), expert_parallel_of(grid));
  lay_out_state(model->params(), *model, deck.parallel, grid, {deck.run.seed, bare, read, keeps_rounded_copy(deck)});
  return model;
}

}  // namespace strata
