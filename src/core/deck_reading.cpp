#include "core/deck_reading.hpp"

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <toml.hpp>

#include "core/deck_keys.hpp"
#include "core/error.hpp"
#include "core/toml_text.hpp"

namespace strata {
namespace {

// Applies one "section.key=value" override to the parsed document.
void apply_override(toml::value& root, const std::string& spec, const std::string& origin) {
  const auto eq = spec.find('=');
  const auto dot = spec.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq)
    throw UserError("--set '" + spec + "': expected section.key=value");
  const std::string section = spec.substr(0, dot), key = spec.substr(dot + 1, eq - dot - 1);
  const std::string text = spec.substr(eq + 1);
  toml::value value;
  check_toml_text(text, "--set " + spec.substr(0, eq));
  try {
    std::istringstream is("v = " + text);
    value = toml::parse(is, "--set").at("v");
  } catch (const std::exception&) {
    value = toml::value(text);  // bare words are strings: --set data.kind=random
  }
  if (!root.is_table()) root = toml::table{};
  auto& top = root.as_table();
  if (!top.count(section)) top[section] = toml::table{};
  if (!top[section].is_table()) throw UserError(origin + ": [" + section + "] must be a table");
  top[section].as_table()[key] = value;
}

}  // namespace

void check_model_fits_grid(const Deck& d, const std::string& origin) {
  const auto& p = d.parallel;
  const auto need = [&](int64_t value, const std::string& what, int64_t by, const std::string& why) {
    if (value % by != 0)
      throw UserError(origin + ": " + what + " (" + std::to_string(value) + ") must be divisible by " + why + " (" +
                      std::to_string(by) + ")");
  };
  need(d.data.batch_size / p.data, "data.batch_size / parallel.data", p.micro_batches, "parallel.micro_batches");
  if (p.schedule == Schedule::Interleaved && p.pipeline > 1)
    need(p.micro_batches, "parallel.micro_batches", p.pipeline, "parallel.pipeline for schedule = \"interleaved\"");
}

namespace {

// Every key the deck has, read through the table (deck_keys.cpp): unknown sections and
// keys first, then each key's type, then each key's range.
Deck read_keys(const toml::value& root, const std::string& origin, const ModelRules& model_rules,
               const DeckKeys& keys) {
  const auto& table = root.as_table();
  for (const auto& [section, value] : table) {
    bool known = false;
    for (const auto& s : deck_sections()) known = known || s.name == section;
    if (!known) throw UserError(origin + ": unknown section [" + section + "]");
    if (!value.is_table()) throw UserError(origin + ": [" + section + "] must be a table");
    for (const auto& kv : value.as_table()) {
      bool declared = false;
      for (const auto& k : keys) declared = declared || (k.section == section && k.name == kv.first);
      if (!declared) throw UserError(origin + ": unknown key '" + section + "." + kv.first + "'");
    }
  }
  Deck d;
  d.path = origin;
  for (const auto& k : keys) {
    const auto s = table.find(k.section);
    if (s == table.end() || !s->second.as_table().count(k.name)) continue;
    try {
      k.set(d, s->second.as_table().at(k.name));
    } catch (const KeyProblem& p) {
      throw UserError(origin + ": " + k.section + "." + k.name + " " + p.why);
    }
  }
  if (model_rules.names_kind) {
    try {
      model_rules.names_kind(d.model.kind);
    } catch (const UserError& e) {
      throw UserError(origin + ": " + e.what());
    }
  }
  // a key of the other model kind is refused, unless it holds its default: decks resolved
  // before the kinds had keys of their own (checkpoints' stored decks) wrote every key
  const Deck defaults;
  for (const auto& k : keys) {
    const auto s = table.find(k.section);
    if (s == table.end() || !s->second.as_table().count(k.name)) continue;
    const std::string why = k.misplaced(d);
    if (!why.empty() && format_deck_value(k.get(d)) != format_deck_value(k.get(defaults)))
      throw UserError(origin + ": " + k.section + "." + k.name + " " + why);
  }
  for (const auto& k : keys)
    if (const std::string why = k.problem(d); !why.empty())
      throw UserError(origin + ": " + k.section + "." + k.name + " " + why);
  return d;
}

// A key set to other than its default where it has no effect (deck_keys.hpp: inert) is
// refused: a user who forgot parallel.pipeline learns it here. A deck a checkpoint stored
// is read as it was written (strata before this rule wrote such decks).
void check_keys_act(const Deck& d, const std::string& origin, const DeckKeys& keys) {
  const Deck defaults;
  for (const auto& k : keys) {
    if (!k.misplaced(d).empty()) continue;
    const std::string value = format_deck_value(k.get(d));
    if (value == format_deck_value(k.get(defaults))) continue;
    if (const std::string needs = k.inert(d); !needs.empty())
      throw UserError(origin + ": " + k.section + "." + k.name + " = " + value +
                      " has no effect in this deck: it needs " + needs);
  }
}

// parallel.dispatch and [variability]: what they run with.
void check_dispatch_keys(const Deck& d, const std::string& origin) {
  const auto& p = d.parallel;
  const auto& v = d.variability;
  const auto refuse = [&](const std::string& what) { throw UserError(origin + ": " + what); };
  if (p.dispatch == Dispatch::Ready && p.pipeline > 1 && p.schedule == Schedule::XPipe)
    refuse(
        "parallel.dispatch = \"ready\" does not run with schedule = \"xpipe\": its weight predictions look ahead "
        "by the updates the fixed order places before each pass");
  if (!v.active()) return;  // (the keys' table refuses them where they have no effect)
  if (v.stage >= p.pipeline)
    refuse("variability.stage = " + std::to_string(v.stage) + " is not a stage of parallel.pipeline = " +
           std::to_string(p.pipeline) + " (0 to " + std::to_string(p.pipeline - 1) + ", or -1 for every stage)");
  if (v.slowdown_min > v.slowdown_max) refuse("variability.slowdown_min must be at most variability.slowdown_max");
  if (v.spike_chance > 1) refuse("variability.spike_chance must be in [0, 1]");
}

// The rules that tie keys together (each key's own range is in the table).
void check_cross_keys(const Deck& d, const std::string& origin) {
  const auto check = [&](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw UserError(origin + ": " + key + " " + why);
  };
  const auto& run = d.run;
  check(!run.name.empty() && run.name.find('/') == std::string::npos && run.name != "." && run.name != "..", "run.name",
        "must be a plain name: not empty, no '/', not '.' or '..' (got \"" + run.name + "\")");
  const auto& data = d.data;
  check(data.kind != DataKind::Text || !data.files.empty(), "data.files",
        "must list at least one file or glob for kind = \"text\"");
  check(data.kind != DataKind::Tokens || !data.token_dir.empty() || !data.shards.empty(), "data.token_dir",
        "or data.shards must name the token shards for kind = \"tokens\"");
  check(data.val_shards.empty() || data.kind == DataKind::Tokens, "data.val_shards",
        "applies to kind = \"tokens\" only");
  const auto& p = d.parallel;
  const bool xpipe = p.schedule == Schedule::XPipe;
  check(p.weight_prediction || xpipe, "parallel.weight_prediction", "applies to schedule = \"xpipe\" only");
  check(p.schedule == Schedule::Interleaved ? p.virtual_stages >= 2 : p.virtual_stages == 1, "parallel.virtual_stages",
        p.schedule == Schedule::Interleaved ? "must be at least 2 for schedule = \"interleaved\" (1 is \"1f1b\")"
                                            : "applies to schedule = \"interleaved\" only");
  check(!p.measure_staleness || xpipe, "parallel.measure_staleness", "applies to schedule = \"xpipe\" only");
  check_tensor_keys(p, origin);
  check_dispatch_keys(d, origin);
  check(d.optim.min_lr <= d.optim.lr, "optim.min_lr", "must be in [0, optim.lr]");
  const bool mgrit = p.mgrit();
  if (mgrit) {
    check(p.micro_batches == 1, "parallel.micro_batches",
          "must be 1 for schedule = \"mgrit\" (it solves whole batches)");
    check(d.layerpar.control == GradientControl::None || d.layerpar.check_every > 0, "layerpar.control",
          "= \"" + to_string(d.layerpar.control) +
              "\" acts on the gradient checks: set layerpar.check_every to how often they run");
  }
  if (p.recompute == Recompute::Full && p.pipeline > 1 && p.schedule == Schedule::XPipe)
    throw UserError(origin +
                    ": parallel.recompute = \"full\" does not run with schedule = \"xpipe\": its backward sees "
                    "other weights than its forward, so a forward run again would not be the one it differentiates");
  if (p.zero > 0 && p.pipeline > 1 && p.schedule == Schedule::XPipe)
    throw UserError(origin + ": parallel.zero = " + std::to_string(p.zero) +
                    " does not run with schedule = \"xpipe\": its weight prediction and "
                    "per-stage updates read every parameter's AdamW moments");
  if (p.grad_sum == GradSum::Nodes && p.zero > 0)
    throw UserError(origin + ": parallel.grad_sum = \"nodes\" does not run with zero = " + std::to_string(p.zero) +
                    " yet: ZeRO's reduce-scatter gives each rank a block in the flat order (use grad_sum = \"flat\")");
  if (p.grad_sum == GradSum::Nodes && mgrit)
    throw UserError(origin +
                    ": parallel.grad_sum = \"nodes\" does not run with schedule = \"mgrit\" yet "
                    "(its planner's traffic is the flat sum's; use grad_sum = \"flat\")");
  if (p.grad_sum == GradSum::Nodes && p.comm_backend == CommBackend::Nccl)
    throw UserError(origin +
                    ": parallel.grad_sum = \"nodes\" is MPI's; NCCL orders its sums by the nodes itself "
                    "(use grad_sum = \"flat\" with comm_backend = \"nccl\")");
  // the ZeRO-3 keys with another stage would be silently without effect: refused instead
  if (p.zero != 3 && (p.zero_keep_params || p.zero_prefetch != 1))
    throw UserError(
        origin + ": parallel." + (p.zero_keep_params ? "zero_keep_params" : "zero_prefetch") +
        " applies to zero = 3, whose passes gather the parameters; this deck has zero = " + std::to_string(p.zero));
  if (p.zero >= 2 && mgrit)
    throw UserError(origin + ": parallel.zero = " + std::to_string(p.zero) +
                    " does not run with schedule = \"mgrit\" yet: its layer-parallel engine "
                    "sums the gradients once per step, not unit by unit (use zero = 1)");
  if (splits_backward(p.schedule) && p.pipeline > 1 && p.recompute != Recompute::None)
    throw UserError(origin + ": parallel.recompute = \"" + to_string(p.recompute) +
                    "\" does not run with schedule = \"" + to_string(p.schedule) +
                    "\": its weight halves run after other micro-batches' passes and need "
                    "each block's own activations, which recomputation does not keep");
  if (p.sequence_parallel && splits_backward(p.schedule) && p.pipeline > 1)
    throw UserError(origin + ": parallel.sequence_parallel does not run with schedule = \"" + to_string(p.schedule) +
                    "\": a block's weight half reads the output gradients its input half gathered over the tensor "
                    "group, which the zero-bubble schedules would have to gather again");
  if (mgrit && p.recompute != Recompute::None)
    throw UserError(origin +
                    ": parallel.recompute does not apply to schedule = \"mgrit\" (its solver keeps the "
                    "states at its own points)");
  if (data.batch_size % p.data != 0)
    throw UserError(origin + ": data.batch_size (" + std::to_string(data.batch_size) +
                    ") must be divisible by parallel.data (" + std::to_string(p.data) + ")");
}

}  // namespace

std::string resolved_deck_text(const Deck& d, const DeckKeys& keys) {
  std::string out = "# resolved deck (defaults and --set overrides applied); source: " + d.path + "\n";
  for (const auto& s : deck_sections()) {
    out += (s.name == deck_sections().front().name ? "[" : "\n[") + s.name + "]\n";
    for (const auto& k : keys)
      if (k.section == s.name && k.misplaced(d).empty()) out += k.name + " = " + format_deck_value(k.get(d)) + "\n";
  }
  return out;
}

std::vector<std::string> inert_key_resets(const Deck& d, const DeckKeys& keys) {
  const Deck defaults;
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const std::string value = format_deck_value(k.get(defaults));
    if (k.misplaced(d).empty() && !k.inert(d).empty() && format_deck_value(k.get(d)) != value)
      out.push_back(k.section + "." + k.name + "=" + value);
  }
  return out;
}

Deck parse_deck(const std::string& toml_text, const std::string& origin, const std::vector<std::string>& overrides,
                const ModelRules& model_rules, KeyEffect effect) {
  toml::value root;
  if (int64_t(toml_text.size()) > kMaxTomlBytes)
    throw UserError(origin + ": larger than a deck can be (" + std::to_string(toml_text.size()) + " bytes; at most " +
                    std::to_string(kMaxTomlBytes) + ")");
  check_toml_text(toml_text, origin);
  try {
    std::istringstream is(toml_text);
    root = toml::parse(is, origin);
  } catch (const toml::syntax_error& e) {
    // toml11's message is a multi-line picture; keep its first line, without the
    // "[error] toml::function:" prefix, and the line number.
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    const auto colon = msg.find(": ");
    if (msg.rfind("[error] toml::", 0) == 0 && colon != std::string::npos) msg = msg.substr(colon + 2);
    throw UserError(origin + ":" + std::to_string(e.location().line()) + ": not valid TOML: " + msg);
  }
  if (!root.is_table()) root = toml::table{};
  for (const auto& spec : overrides) apply_override(root, spec, origin);
  const DeckKeys& keys = model_rules.table ? *model_rules.table : core_deck_keys();
  Deck d = read_keys(root, origin, model_rules, keys);
  check_cross_keys(d, origin);
  if (model_rules.check) model_rules.check(d, origin);
  if (effect == KeyEffect::Refuse) check_keys_act(d, origin, keys);  // (after the rules with more to say)
  check_model_fits_grid(d, origin);
  d.resolved_toml = resolved_deck_text(d, keys);
  return d;
}

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides, const ModelRules& model_rules,
               KeyEffect effect) {
  return parse_deck(read_toml_file(path, "deck"), path, overrides, model_rules, effect);
}

}  // namespace strata
