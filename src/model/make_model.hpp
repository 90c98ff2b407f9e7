#pragma once
// The one place a deck's model is built: its kind's (model.kind, model_kind.hpp), as the
// part this rank holds (its pipeline stage and tensor shard) on a Grid.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "model/model_kind.hpp"
#include "model/stage_model.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/expert_parallel.hpp"
#include "parallel/tensor_parallel.hpp"
#include "report/run_description.hpp"

namespace strata {

// The model this rank holds: parameters initialised from run.seed (the same global
// weights on any layout), ZeRO-1's moments sharded over the data group when
// parallel.zero = 1 asks for it.
std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const Grid& grid, const DataShape& data = {});
// The same part without a Grid: pipeline stage `stage` of deck.parallel's layout, split
// as tp says (whose communicators may be absent when allocate = false). allocate = false
// declares the parameters without memory: the planner's dry models (shards, traffic and
// sizes; no forward or backward). cp: the context split (its ring may be absent when
// allocate = false); ep: the expert split likewise. One-rank tools (generate) take the defaults.
std::unique_ptr<StageModel<float>> make_model(const Deck& deck, const TensorParallel& tp = {}, int stage = 0,
                                              const DataShape& data = {}, bool allocate = true,
                                              const ContextParallel& cp = {}, const ExpertParallel& ep = {});

// What the deck's model tells a run about itself (run_description.hpp): its lines, samples
// per step, its metrics; model is what make_model built for the deck. With
// run.probe_gemm the GEMM rate at the model's shapes is measured here (a language model's
// utilisation column).
RunDescription describe_model(const Deck& deck, StageModel<float>& model, const RunSetting& run);

template <class T>
class GPT;
// make_model's model as the GPT it is, for tools that use the GPT's own methods (the
// planner, calibrate, generate); a logic error for another kind (they check the kind first).
std::unique_ptr<GPT<float>> as_gpt(std::unique_ptr<StageModel<float>> model);

// Whether the deck's model keeps its parameters rounded to bf16 (model.bf16_round_once,
// where products round in a pass of their own: ParamStore::keep_rounded_copy); allocated
// models do it when this says so, the planner counts its bytes.
bool keeps_rounded_copy(const Deck& deck);

// (m, k, n) of the deck's model's matrix products, a data replica's rows as the trainer
// probes them (strata calibrate measures the GEMM rate there); images are taken as
// Fashion-MNIST's (784 pixels, 10 classes).
std::vector<std::array<int64_t, 3>> model_product_shapes(const Deck& deck);

// The GEMM rate at the deck's model's product shapes (kernels/gemm_probe.hpp's
// gemm_rate_at of model_product_shapes), in FLOP/s: the limit a step is set against (the
// progress line's "% of gemm", strata calibrate's gemm_flops, bench/limit).
double model_gemm_rate(const Deck& deck, Precision precision, double seconds_each, int64_t most_calls = INT64_MAX,
                       std::vector<std::pair<std::string, double>>* each = nullptr);

// model.precision = "bf16" where this build and machine cannot multiply in bf16: one line.
void require_precision_runs(Precision precision);

}  // namespace strata
