#pragma once
// Resuming a run from a checkpoint (strata train --restart): this rank's part of its state
// read into the job (parameters and moments, the engine's decisions, the gradient codec's
// error feedback where it was written on the same place), the deck checked against the one
// the checkpoint was written with, and what changed said on rank 0's log.
#include <string>

#include "checkpoint/model_checkpoint.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"
#include "train/train_job.hpp"

namespace strata {

// Throws UserError where the model or run.seed differ from the checkpoint's.
TrainState resume_from_checkpoint(const std::string& path, TrainSteps& job, const Deck& deck, const Log& log);

}  // namespace strata
