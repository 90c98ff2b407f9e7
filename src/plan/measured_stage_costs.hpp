#pragma once
// What a pipeline run measured of its stages, as the schedule simulator's costs: read from
// the run's stages.csv (train/stage_times.hpp), per stage the median over its steps (the
// first two, which warm up, left out where there are more) of the forward and backward
// seconds per step over the run's own micro-batches (the file's column: the deck simulated
// may ask for another count), i.e. a micro-batch's passes without injected
// slowdowns, and the step's seconds outside the pipeline (the update, clipping, data: the
// step's wall time less the passes, injected waits, pipeline waits and collectives; and
// the collectives' time on the rank that came to them last, as the others' is a wait for
// it), so that `strata plan --schedule --stage-costs` predicts seconds per
// step a run can be held to.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/pipeline/simulate.hpp"

namespace strata {

struct MeasuredStages {
  PipeCosts costs;                        // stage_forward, stage_backward: one micro-batch's passes
  double outside = 0;                     // seconds per step outside the pipeline, the ranks' mean
  double step = 0;                        // the run's median seconds per step
  int64_t first_step = 0, last_step = 0;  // the steps used (1 the first, as in metrics.csv)
};

// UserError naming the cause when the file cannot be read, lacks a column, or holds
// other stages than 0..stages-1.
MeasuredStages read_stage_costs(const std::string& stages_csv, int stages);

// The middle value (of an even count, the mean of the two middle ones).
double median(std::vector<double> values);

}  // namespace strata
