#include "train/resume.hpp"

#include <algorithm>

#include "comm/across_codec.hpp"
#include "core/deck_changes.hpp"
#include "core/error.hpp"
#include "core/timers.hpp"
#include "model/model_kind.hpp"

namespace strata {

namespace {

// The deck a checkpoint was written with against this run's: the model and the seed
// decide what the parameters mean and must match (but the products' precision: the
// checkpoint holds fp32 parameters either way); the rest may change and is listed.
std::string check_deck_against_checkpoint(const std::string& path, const std::string& written_with,
                                          const std::string& now) {
  std::string changed;
  for (const auto& c : deck_changes(written_with, now, model_deck_keys())) {
    if ((c.key.rfind("model.", 0) == 0 && c.key != "model.precision" && c.key != "model.init_from") ||
        c.key == "run.seed")
      throw UserError("checkpoint '" + path + "' was written with " + c.key + " = " + c.before + ", the deck has " +
                      c.after + " (the model and run.seed must match to restart)");
    changed += (changed.empty() ? "" : ", ") + c.key + " " + c.before + " -> " + c.after;
  }
  return changed;
}

// parallel.grad_compression's error feedback: restored where the checkpoint was written on
// the same place (codec, layout, ranks, replicas a node), else it starts from zero, said once.
void restore_codec_state(const std::string& path, const TrainState& start, TrainSteps& job, const Log& log) {
  AcrossCodec* codec = job.grid().across_codec();
  if (!codec) return;
  const std::string place = job.grid().across_codec_place(job.facts().layout);
  if (start.codec_place == place) {
    codec->restore(read_codec_state(path, job.grid().world_rank()));
    log.info("strata: restart: the " + codec->name() + " error feedback continues from the checkpoint");
  } else {
    log.info("strata: restart: the " + codec->name() + " error feedback starts from zero (the checkpoint's is " +
             (start.codec_place.empty() ? std::string("absent") : "of " + start.codec_place) + "; this run is " +
             place + ")");
  }
}

}  // namespace

TrainState resume_from_checkpoint(const std::string& path, TrainSteps& job, const Deck& deck, const Log& log) {
  const double t0 = Timers::now();
  TrainState start = read_model_checkpoint(path, job.params());
  job.restore_engine_state(start.engine);
  restore_codec_state(path, start, job, log);
  const double dt = Timers::now() - t0;
  const std::string changed = check_deck_against_checkpoint(path, start.deck, deck.resolved_toml);
  const double mib = double(checkpoint_bytes(job.params())) / double(1 << 20);
  log.info(strfmt("strata: restart: read %s (step %lld, %.1f MiB of tensors) in %.3f s (%.0f MB/s)", path.c_str(),
                  (long long)start.step, mib, dt, mib * 1.048576 / std::max(dt, 1e-9)));
  if (!changed.empty()) log.info("strata: restart: changed since the checkpoint: " + changed);
  if (!start.engine.empty()) log.info("strata: restart: the engine continues as it was: " + start.engine);
  return start;
}

}  // namespace strata
