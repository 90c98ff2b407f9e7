#pragma once
// What a model kind (model.kind) is to the rest of strata: its name, the data it reads,
// the rules its decks must keep, how it is built on a rank and how a run describes it.
// The kinds are listed in model_kind.cpp (model_kinds()); adding one is a file in
// src/model and a line there. The core deck knows no kind: it keeps model.kind as a word,
// a kind declares its own keys (ModelKind::keys) and rules, and load_model_deck below
// reads a deck through the whole table, refusing a word that names no kind, another
// kind's key and a deck the kind's rules refuse, in one line each.
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/deck_keys.hpp"
#include "core/deck_reading.hpp"
#include "model/stage_model.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/expert_parallel.hpp"
#include "parallel/tensor_parallel.hpp"
#include "report/run_description.hpp"

namespace strata {

// What a model's input and output layers take from the data rather than the deck
// (images: pixels per sample, classes); zeros where the deck says (the GPT's vocabulary).
struct DataShape {
  int64_t features = 0;
  int64_t classes = 0;
};

// The part of the model a rank builds: its pipeline stage and splits (make_model).
struct ModelPart {
  const TensorParallel& tp;
  int stage = 0;
  DataShape data;
  bool allocate = true;  // false: parameters declared without memory (the planner's dry models)
  const ContextParallel& cp;
  const ExpertParallel& ep;
};

// Refuses a deck: throws UserError "origin: key why" when ok is false.
using DeckRule = std::function<void(bool ok, const std::string& key, const std::string& why)>;

struct ModelKind {
  std::string name;                                 // model.kind
  std::string title;                                // in messages: "the GPT", "the residual network", ...
  std::string summary;                              // one line for the deck reference: what it is, its keys
  std::vector<DataKind> reads;                      // the data.kind values it trains on
  std::vector<Schedule> schedules;                  // the schedules it runs (parallel.schedule; one stage: any of them)
  bool pipeline = false;                            // its layers split over parallel.pipeline stages
  bool layer_parallel = false;                      // parallel.schedule = "mgrit" (its layers are ODE steps)
  bool tensor_split = false;                        // parallel.tensor_cols / tensor_rows > 1
  bool context_split = false;                       // parallel.context > 1 (its samples are sequences)
  bool selective_recompute = false;                 // parallel.recompute = "selective"
  bool gathers_params = false;                      // parallel.zero = 3 (its passes name the units they read)
  bool dry_models = false;                          // make with allocate = false (the planner's models)
  int64_t (*layers)(const ModelConfig&) = nullptr;  // what parallel.pipeline divides ...
  std::string layers_key;                           // ... and the key that sets it
  // its own rules for a deck of this kind, past each key's own range and the core's rules
  std::function<void(const Deck&, const DeckRule&)> check;
  std::function<std::unique_ptr<StageModel<float>>(const Deck&, const ModelPart&)> make;
  std::function<RunDescription(const Deck&, StageModel<float>&, const RunSetting&)> describe;
  // (m, k, n) of its matrix products, a data replica's rows (model_product_shapes)
  std::function<std::vector<std::array<int64_t, 3>>(const Deck&)> product_shapes;
  // its own deck keys (core/deck_key.hpp: each refuses a deck of another kind, misplaced)
  DeckKeys keys;
};

// The GPT (gpt_kind.cpp), the kind the planner, generate and the model files serve.
inline bool is_gpt(const ModelConfig& m) { return m.kind == "gpt"; }

// Every kind, in the order the deck reference lists them.
const std::vector<ModelKind>& model_kinds();
// Every key a deck may have: the core's and every kind's (core/deck_keys.hpp's
// merge_deck_keys), the table decks are read, written, compared and documented by.
const DeckKeys& model_deck_keys();
// The deck's kind; a UserError naming the kinds when model.kind names none.
const ModelKind& model_kind_of(const Deck& deck);

// Layer-parallel training's rule on a kind's ODE steps (steps_what names them): the
// coarsest MGRIT level must divide them (cfactor^(levels-1)).
void check_mgrit_steps(const Deck& d, int64_t steps, const std::string& steps_what, const DeckRule& rule);

// A deck as the core reads it (load_deck, parse_deck), then checked against its model
// kind (check_model_deck): what every command that runs or plans a model reads.
// KeyEffect::Ignore where the deck's layout keys are the planner's to choose (strata plan
// --ranks, plan_check): a key without effect in the deck's own layout is no mistake there.
Deck load_model_deck(const std::string& path, const std::vector<std::string>& overrides = {},
                     KeyEffect effect = KeyEffect::Refuse);
Deck parse_model_deck(const std::string& toml_text, const std::string& origin,
                      const std::vector<std::string>& overrides = {}, KeyEffect effect = KeyEffect::Refuse);
// The kind's rules: it exists, reads data.kind, runs parallel.schedule, has at least
// parallel.pipeline layers, and its own check. origin prefixes the message.
void check_model_deck(const Deck& deck, const std::string& origin);
// The deck reference's section on the kinds (strata deck --reference).
std::string model_kinds_reference();

}  // namespace strata
