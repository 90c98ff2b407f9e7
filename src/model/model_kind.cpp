#include "model/model_kind.hpp"

#include <algorithm>
#include <cmath>
#include <toml.hpp>

#include "core/error.hpp"

namespace strata {

// Each kind's definition, in its own file.
ModelKind gpt_kind();      // gpt_kind.cpp
ModelKind resnet_kind();   // resnet_kind.cpp
ModelKind softmax_kind();  // softmax_kind.cpp

const std::vector<ModelKind>& model_kinds() {
  static const std::vector<ModelKind> kinds = {gpt_kind(), resnet_kind(), softmax_kind()};
  return kinds;
}

namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// "a", "a or b", "a, b or c"
std::string either(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

// The kinds that have `has`, as model.kind = "a" or "b".
template <class Has>
std::string kinds_that(Has has) {
  std::vector<std::string> names;
  for (const auto& k : model_kinds())
    if (has(k)) names.push_back(quoted(k.name));
  return "model.kind = " + either(names);
}

// What a kind runs, for the messages that refuse another split.
std::string runs(const ModelKind& k) {
  std::vector<std::string> schedules;
  for (const auto s : k.schedules) schedules.push_back(to_string(s));
  std::string out = k.pipeline ? "data x pipeline (" + either(schedules) + ")" : "data parallelism";
  if (k.layer_parallel) out += " or data x layer-parallel (mgrit)";
  return out;
}

bool has(const std::vector<Schedule>& list, Schedule s) { return std::find(list.begin(), list.end(), s) != list.end(); }

}  // namespace

const ModelKind& model_kind_of(const Deck& deck) {
  for (const auto& k : model_kinds())
    if (k.name == deck.model.kind) return k;
  std::vector<std::string> names;
  for (const auto& k : model_kinds()) names.push_back(quoted(k.name));
  throw UserError("model.kind " + quoted(deck.model.kind) + " names no model kind: it must be " + either(names));
}

void check_model_deck(const Deck& d, const std::string& origin) {
  const auto rule = [&](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw UserError(origin + ": " + key + " " + why);
  };
  const ModelKind* kind = nullptr;
  try {
    kind = &model_kind_of(d);
  } catch (const UserError& e) {
    throw UserError(origin + ": " + e.what());
  }
  const ModelKind& k = *kind;
  if (k.check) k.check(d, rule);  // its own first: they say more than the rules of every kind
  const auto& p = d.parallel;
  const DataKind data = d.data.kind;
  rule(p.expert == 1 || d.model.moe_experts > 0, "parallel.expert",
       "= " + std::to_string(p.expert) +
           " splits the experts of a mixture-of-experts model, but model.moe_experts is 0 (a dense model)");
  rule(std::find(k.reads.begin(), k.reads.end(), data) != k.reads.end(), "data.kind",
       quoted(to_string(data)) + " goes with " + kinds_that([&](const ModelKind& m) {
         return std::find(m.reads.begin(), m.reads.end(), data) != m.reads.end();
       }));
  if (p.mgrit())
    rule(k.layer_parallel, "parallel.schedule",
         "\"mgrit\" solves the layers of " + kinds_that([](const ModelKind& m) { return m.layer_parallel; }) +
             " in parallel (ODE steps); " + k.title + " runs " + runs(k));
  else
    rule(has(k.schedules, p.schedule), "parallel.schedule",
         quoted(to_string(p.schedule)) + " runs " +
             kinds_that([&](const ModelKind& m) { return has(m.schedules, p.schedule); }) + "; " + k.title + " runs " +
             runs(k));
  rule(k.tensor_split || p.tensor_size() == 1, "parallel.tensor_cols",
       "splits the layers' weights; model.kind = " + quoted(k.name) + " has no tensor split: it runs " + runs(k));
  rule(k.context_split || p.context == 1, "parallel.context",
       "splits a sequence's tokens; " + k.title + "'s samples are not sequences: use parallel.data");
  rule(k.selective_recompute || p.recompute != Recompute::Selective, "parallel.recompute",
       "= \"selective\" applies to " + kinds_that([](const ModelKind& m) { return m.selective_recompute; }) +
           " only: " + k.title +
           " has no part of a layer that selective recomputation would drop (\"full\" recomputes "
           "whole layers)");
  rule(k.gathers_params || p.zero < 3, "parallel.zero",
       "= 3 runs " + kinds_that([](const ModelKind& m) { return m.gathers_params; }) + " only: " + k.title +
           "'s passes do not name the parameters they read, which ZeRO-3 gathers (use zero = 2)");
  rule(k.layers(d.model) >= p.pipeline, k.layers_key,
       "(" + std::to_string(k.layers(d.model)) + ") must be at least parallel.pipeline (" + std::to_string(p.pipeline) +
           "): every stage holds at least one layer");
}

void check_mgrit_steps(const Deck& d, int64_t steps, const std::string& steps_what, const DeckRule& rule) {
  const auto& lp = d.layerpar;
  // cfactor^(levels-1) must divide the steps; it is multiplied out only while it cannot
  // overflow, and shown in floating point beyond that
  int64_t unit = 1;
  bool beyond = false;
  for (int64_t l = 1; l < d.parallel.mgrit_levels && !beyond; ++l) {
    beyond = unit > steps / lp.cfactor;
    if (!beyond) unit *= lp.cfactor;
  }
  const double power = std::pow(double(lp.cfactor), double(d.parallel.mgrit_levels - 1));
  rule(!beyond && steps % unit == 0, "layerpar.levels",
       "and layerpar.cfactor do not fit: " + steps_what + " must be a multiple of cfactor^(levels-1) (" +
           (power < 1e15 ? std::to_string(int64_t(power)) : toml::format(toml::value(power))) + ")");
}

const DeckKeys& model_deck_keys() {
  static const DeckKeys table = [] {
    DeckKeys kinds;
    for (const auto& k : model_kinds()) kinds.insert(kinds.end(), k.keys.begin(), k.keys.end());
    return merge_deck_keys(kinds);
  }();
  return table;
}

namespace {
ModelRules kind_rules() {
  return {[](const std::string& kind) {
            Deck named;
            named.model.kind = kind;
            model_kind_of(named);
          },
          check_model_deck, &model_deck_keys()};
}
}  // namespace

Deck parse_model_deck(const std::string& toml_text, const std::string& origin,
                      const std::vector<std::string>& overrides, KeyEffect effect) {
  return parse_deck(toml_text, origin, overrides, kind_rules(), effect);
}

Deck load_model_deck(const std::string& path, const std::vector<std::string>& overrides, KeyEffect effect) {
  return load_deck(path, overrides, kind_rules(), effect);
}

std::string model_kinds_reference() {
  std::string out = "\n## Model kinds\n\n`model.kind` names one of these (src/model/model_kind.cpp lists them).\n\n";
  out += "| kind | what it is | data.kind | parallel |\n|---|---|---|---|\n";
  for (const auto& k : model_kinds()) {
    std::vector<std::string> data;
    for (const auto dk : k.reads) data.push_back("`" + to_string(dk) + "`");
    std::string parallel = runs(k);
    if (k.tensor_split) parallel += "; tensor (1D, 2D)";
    if (k.context_split) parallel += "; context";
    if (k.gathers_params) parallel += "; ZeRO-3";
    out += "| `" + k.name + "` | " + k.summary + " | " + either(data) + " | " + parallel + " |\n";
  }
  return out;
}

}  // namespace strata
