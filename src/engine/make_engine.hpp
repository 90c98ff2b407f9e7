#pragma once
// The one place a deck's engine is chosen (parallel.pipeline, parallel.schedule): data
// parallel on the whole model, a pipeline schedule over the stages (XPipe's stream with
// its weight prediction and staleness meter), or MGRIT over layer blocks.
#include <memory>

#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "engine/pipeline/staleness_meter.hpp"
#include "engine/train_engine.hpp"
#include "model/stage_model.hpp"

namespace strata {

// model: what make_model built on this grid. staleness: XPipe's meter (parallel.measure_staleness),
// or nullptr. MGRIT needs a model whose layers are ODE steps (model/ode_network.hpp).
std::unique_ptr<TrainEngine<float>> make_engine(const Deck& deck, const Grid& grid, StageModel<float>& model,
                                                StalenessMeter<float>* staleness = nullptr);

}  // namespace strata
