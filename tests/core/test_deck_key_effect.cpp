// No deck key is silently without effect: the test walks every key of the reference. A key
// that acts only in some decks has a witness here: a deck where it is set to other than its
// default and has no effect, which must be refused in one line naming the key, and the
// keys that make it act, with which the same deck must be accepted. Every other key acts
// in every deck of its model kind, and is listed with the reason. A key added to the table
// without a place here fails the test.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/deck.hpp"
#include "core/deck_keys.hpp"
#include "core/deck_reading.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"

using namespace strata;

namespace {

struct Witness {
  std::vector<std::string> inert;  // the key set (and what else the witness needs) where it has no effect
  std::vector<std::string> acts;   // added: the keys that make it act
};

const std::vector<std::string> kMgrit = {"parallel.pipeline=2", "parallel.schedule=\"mgrit\""};
const std::vector<std::string> kExperts = {"model.moe_experts=4"};

std::map<std::string, Witness> witnesses() {
  return {
      {"run.max_skipped_steps", {{"run.max_skipped_steps=3"}, {"run.on_nonfinite=\"skip\""}}},
      {"model.bf16_round_once", {{"model.bf16_round_once=false"}, {"model.precision=\"bf16\""}}},
      {"model.moe_top_k", {{"model.moe_top_k=1"}, kExperts}},
      {"model.moe_every", {{"model.moe_every=1"}, kExperts}},
      {"model.moe_capacity_factor", {{"model.moe_capacity_factor=1.25"}, kExperts}},
      {"model.moe_ffn_hidden", {{"model.moe_ffn_hidden=128"}, kExperts}},
      {"optim.moe_aux_loss", {{"optim.moe_aux_loss=0.02"}, kExperts}},
      {"optim.moe_z_loss", {{"optim.moe_z_loss=0.001"}, kExperts}},
      {"data.dir", {{"data.dir=\"/tmp\""}, {"data.kind=\"images\"", "model.kind=\"softmax\""}}},
      {"data.shards", {{"data.shards=[\"a.tok\"]"}, {"data.kind=\"tokens\""}}},
      {"data.val_shards", {{"data.val_shards=[\"v.tok\"]"}, {"data.kind=\"tokens\"", "data.shards=[\"a.tok\"]"}}},
      {"data.val_fraction", {{"data.val_fraction=0.1"}, {"data.kind=\"text\"", "data.files=[\"a.txt\"]"}}},
      {"parallel.context_mode", {{"parallel.context_mode=\"all-to-all\""}, {"parallel.context=2"}}},
      {"parallel.tensor_rows", {{"parallel.tensor_rows=2", "parallel.tensor_cols=2"}, {"parallel.tensor_mode=\"2d\""}}},
      {"parallel.tensor_mode", {{"parallel.tensor_mode=\"3d\""}, {"parallel.tensor_x=2"}}},
      {"parallel.tensor_x", {{"parallel.tensor_x=2"}, {"parallel.tensor_mode=\"3d\""}}},
      {"parallel.tensor_y", {{"parallel.tensor_y=2"}, {"parallel.tensor_mode=\"3d\""}}},
      {"parallel.tensor_depth", {{"parallel.tensor_depth=2"}, {"parallel.tensor_mode=\"3d\""}}},
      {"parallel.tensor_overlap",
       {{"parallel.tensor_overlap=false"}, {"parallel.tensor_mode=\"3d\"", "parallel.tensor_x=2"}}},
      {"parallel.sequence_parallel", {{"parallel.sequence_parallel=true"}, {"parallel.tensor_cols=2"}}},
      {"parallel.expert", {{"parallel.expert=2", "parallel.data=2"}, kExperts}},
      {"parallel.schedule", {{"parallel.schedule=\"xpipe\""}, {"parallel.pipeline=2"}}},
      {"parallel.zero_prefetch", {{"parallel.zero_prefetch=2"}, {"parallel.zero=3", "parallel.data=2"}}},
      {"parallel.grad_compression", {{"parallel.grad_compression=\"int8\""}, {"parallel.grad_sum=\"nodes\""}}},
      {"parallel.powersgd_rank",
       {{"parallel.powersgd_rank=2"}, {"parallel.grad_sum=\"nodes\"", "parallel.grad_compression=\"powersgd\""}}},
      {"parallel.zero_keep_params", {{"parallel.zero_keep_params=true"}, {"parallel.zero=3", "parallel.data=2"}}},
      {"parallel.virtual_stages",
       {{"parallel.virtual_stages=2", "parallel.pipeline=2", "parallel.micro_batches=2"},
        {"parallel.schedule=\"interleaved\""}}},
      {"parallel.last_stage_layers", {{"parallel.last_stage_layers=1"}, {"parallel.pipeline=2"}}},
      {"parallel.weight_prediction",
       {{"parallel.weight_prediction=false"}, {"parallel.pipeline=2", "parallel.schedule=\"xpipe\""}}},
      {"parallel.measure_staleness",
       {{"parallel.measure_staleness=true"}, {"parallel.pipeline=2", "parallel.schedule=\"xpipe\""}}},
      {"parallel.dispatch", {{"parallel.dispatch=\"ready\""}, {"parallel.pipeline=2"}}},
      {"parallel.dispatch_in_flight",
       {{"parallel.dispatch_in_flight=4", "parallel.pipeline=2"}, {"parallel.dispatch=\"ready\""}}},
      {"variability.slowdown_max", {{"variability.slowdown_max=0.5"}, {"parallel.pipeline=2"}}},
      {"variability.stage", {{"variability.stage=1", "parallel.pipeline=2"}, {"variability.slowdown_max=0.5"}}},
      {"variability.draw", {{"variability.draw=\"spikes\"", "parallel.pipeline=2"}, {"variability.slowdown_max=0.5"}}},
      {"variability.slowdown_min",
       {{"variability.slowdown_min=0.1", "parallel.pipeline=2"}, {"variability.slowdown_max=0.5"}}},
      {"variability.spike_chance",
       {{"variability.spike_chance=0.5", "parallel.pipeline=2", "variability.slowdown_max=0.5"},
        {"variability.draw=\"spikes\""}}},
      {"variability.seed", {{"variability.seed=3", "parallel.pipeline=2"}, {"variability.slowdown_max=0.5"}}},
      {"layerpar.levels", {{"layerpar.levels=2"}, kMgrit}},
      {"layerpar.cfactor", {{"layerpar.cfactor=2"}, kMgrit}},
      {"layerpar.fwd_iterations", {{"layerpar.fwd_iterations=3"}, kMgrit}},
      {"layerpar.bwd_iterations", {{"layerpar.bwd_iterations=2"}, kMgrit}},
      {"layerpar.tolerance", {{"layerpar.tolerance=1e-6"}, kMgrit}},
      {"layerpar.relaxation", {{"layerpar.relaxation=\"FCF\""}, kMgrit}},
      {"layerpar.warm_start", {{"layerpar.warm_start=false"}, kMgrit}},
      {"layerpar.control", {{"layerpar.control=\"switch\"", "layerpar.check_every=5"}, kMgrit}},
      {"layerpar.check_every", {{"layerpar.check_every=5"}, kMgrit}},
      {"layerpar.max_gradient_error", {{"layerpar.max_gradient_error=0.5"}, kMgrit}},
      {"layerpar.buffer_open", {{"layerpar.buffer_open=1"}, kMgrit}},
      {"layerpar.buffer_close", {{"layerpar.buffer_close=1"}, kMgrit}},
  };
}

// The keys that act in every deck of their model kind (a [model] key of another kind is
// refused by the kinds' rule), and why.
const std::set<std::string> kAlwaysAct = {
    // the run's bookkeeping: every run has a name, a length, logs, a seed, stops; checkpoints
    // are written by signals and run.max_walltime too, validation at the end (resnet)
    "run.name", "run.out_dir", "run.steps", "run.log_every", "run.val_every", "run.val_batches", "run.seed",
    "run.checkpoint_every", "run.keep_checkpoints", "run.max_walltime", "run.on_nonfinite", "run.stop_timeout",
    // the model's shape and initialisation
    "model.kind", "model.n_layer", "model.n_embd", "model.n_head", "model.vocab_size", "model.seq_len",
    "model.padded_vocab_size", "model.steps", "model.width", "model.channels", "model.t_final", "model.step_init_std",
    "model.init_std", "model.init_from", "model.precision", "model.moe_experts",
    // strata tokenize reads these whatever data.kind is
    "data.kind", "data.files", "data.token_dir", "data.tokenizer", "data.tokenizer_type", "data.shard_mb",
    "data.batch_size",
    // the grid's sizes and how every layout runs; the bucket size and the node-by-node sum
    // tune the data-parallel sum and are harmless on the layouts without one (a deck serves several layouts:
    // plan_check's)
    "parallel.data", "parallel.pipeline", "parallel.context", "parallel.tensor_cols", "parallel.placement",
    "parallel.comm_backend", "parallel.grad_bucket_mb", "parallel.grad_sum", "parallel.micro_batches",
    "parallel.recompute", "parallel.zero",
    // AdamW and its schedule
    "optim.lr", "optim.min_lr", "optim.warmup_steps", "optim.weight_decay", "optim.beta1", "optim.beta2", "optim.eps",
    "optim.grad_clip"};

// Through the whole key table (the core's and the kinds' keys) and the kinds' rules.
Deck parse(const std::vector<std::string>& overrides) {
  return parse_model_deck("[data]\nkind = \"random\"\n", "witness.toml", overrides);
}

}  // namespace

TEST_CASE("every deck key either acts in every deck or is refused where it has no effect", "[deck][keys]") {
  const auto table = witnesses();
  for (const auto& k : model_deck_keys()) {
    const std::string name = k.section + "." + k.name;
    INFO(name);
    const auto w = table.find(name);
    REQUIRE((w != table.end()) != (kAlwaysAct.count(name) == 1));  // placed here exactly once
    if (w == table.end()) continue;
    try {
      parse(w->second.inert);
      FAIL("accepted where it has no effect");
    } catch (const UserError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.find('\n') == std::string::npos);
      CHECK(what.find(name) != std::string::npos);
    }
    std::vector<std::string> acting = w->second.inert;
    acting.insert(acting.end(), w->second.acts.begin(), w->second.acts.end());
    CHECK_NOTHROW(parse(acting));
  }
  for (const auto& [name, w] : table) {  // no witness for a key the table does not have
    bool declared = false;
    for (const auto& k : model_deck_keys()) declared = declared || k.section + "." + k.name == name;
    CHECK(declared);
  }
}

TEST_CASE("a key without effect is refused naming what it needs; a checkpoint's deck is read as written",
          "[deck][keys]") {
  try {
    parse({"parallel.schedule=\"xpipe\""});
    FAIL("xpipe without a pipeline was accepted");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) ==
          "witness.toml: parallel.schedule = \"xpipe\" has no effect in this deck: it needs parallel.pipeline > 1 "
          "(pipeline stages)");
  }
  // its default says nothing, and a deck a checkpoint stored is read as it was written
  CHECK_NOTHROW(parse({"parallel.schedule=\"1f1b\""}));
  CHECK(
      parse_model_deck("[data]\nkind = \"random\"\n[parallel]\nschedule = \"zb-h1\"\n", "stored", {}, KeyEffect::Ignore)
          .parallel.schedule == Schedule::ZBH1);
}
