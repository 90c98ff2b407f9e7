#include "core/deck.hpp"

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
  const auto& m = d.model;
  const auto need = [&](int64_t value, const std::string& what, int64_t by, const std::string& why) {
    if (value % by != 0)
      throw UserError(origin + ": " + what + " (" + std::to_string(value) + ") must be divisible by " + why + " (" +
                      std::to_string(by) + ")");
  };
  if (p.tensor_mode == TensorMode::OneD && p.tensor_cols > 1) {
    const int64_t t = p.tensor_cols;
    need(m.n_head, "model.n_head", t, "parallel.tensor_cols");
    need(4 * m.n_embd, "4 x model.n_embd", t, "parallel.tensor_cols");
    need(m.vocab_rows(), m.padded_vocab_size > m.vocab_size ? "model.padded_vocab_size" : "model.vocab_size", t,
         "parallel.tensor_cols");
  }
  need(d.data.batch_size / p.data, "data.batch_size / parallel.data", p.micro_batches, "parallel.micro_batches");
  if (p.tensor_mode == TensorMode::TwoD && p.tensor_rows > 1) {
    const int64_t q = p.tensor_rows;
    need(m.n_head, "model.n_head", q, "q = parallel.tensor_rows");
    need(m.n_embd, "model.n_embd", q * q, "q^2");
    need(m.vocab_rows(), m.padded_vocab_size > m.vocab_size ? "model.padded_vocab_size" : "model.vocab_size", q,
         "q = parallel.tensor_rows");
    need(d.data.batch_size / p.data / p.micro_batches, "data.batch_size / parallel.data / parallel.micro_batches", q,
         "q = parallel.tensor_rows");
  }
  if (p.context > 1 && p.context_mode == ContextMode::AllToAll) {
    const int64_t split = p.tensor_mode == TensorMode::TwoD ? p.tensor_rows : p.tensor_cols;
    if ((m.n_head / split) % p.context != 0)
      throw UserError(origin + ": the heads a tensor rank holds (model.n_head / " +
                      (p.tensor_mode == TensorMode::TwoD ? std::string("q") : std::string("tensor_cols")) + " = " +
                      std::to_string(m.n_head / split) + ") must be divisible by parallel.context (" +
                      std::to_string(p.context) +
                      ") for context_mode = \"all-to-all\": each rank takes 1/context of them "
                      "over whole sequences");
  }
  if (p.context > 1 && m.seq_len % (2 * p.context) != 0)
    throw UserError(origin + ": model.seq_len (" + std::to_string(m.seq_len) +
                    ") must be divisible by 2 x parallel.context (" + std::to_string(2 * p.context) +
                    "): each context rank holds two of the 2 x context chunks of every sequence");
  if (p.sequence_parallel)
    need(d.data.batch_size / p.data / p.micro_batches * (m.seq_len / p.context),
         "a micro-batch's tokens per rank (data.batch_size / parallel.data / parallel.micro_batches x model.seq_len / "
         "parallel.context)",
         p.tensor_cols, "parallel.tensor_cols for sequence_parallel");
  if (m.moe_experts > 0 && m.moe_top_k > m.moe_experts)
    throw UserError(origin + ": model.moe_top_k (" + std::to_string(m.moe_top_k) +
                    ") must be at most model.moe_experts (" + std::to_string(m.moe_experts) + ")");
  if (p.expert > 1) {
    if (m.moe_experts == 0)
      throw UserError(origin + ": parallel.expert = " + std::to_string(p.expert) +
                      " splits the experts of a mixture-of-experts model, but model.moe_experts is 0 (a dense model)");
    need(p.data, "parallel.data", p.expert, "parallel.expert (the expert ranks are taken from the data group)");
    need(m.moe_experts, "model.moe_experts", p.expert, "parallel.expert (each expert rank holds as many experts)");
  }
  if (m.moe_experts > 0 && p.tensor_mode == TensorMode::OneD && p.tensor_cols > 1) {
    need(m.moe_experts, "model.moe_experts", p.expert * p.tensor_cols,
         "parallel.expert x parallel.tensor_cols (under a 1D split the tensor ranks are expert ranks too)");
    need(d.data.batch_size / p.data / p.micro_batches * (m.seq_len / p.context),
         "a micro-batch's tokens per rank (data.batch_size / parallel.data / parallel.micro_batches x model.seq_len / "
         "parallel.context)",
         p.tensor_cols, "parallel.tensor_cols for a mixture of experts (each tensor rank routes a share)");
  }
  if (m.layers() < p.pipeline)
    throw UserError(origin + ": " + m.layers_key() + " (" + std::to_string(m.layers()) +
                    ") must be at least parallel.pipeline (" + std::to_string(p.pipeline) +
                    "): every stage holds at least one layer");
  if (p.schedule == Schedule::Interleaved && p.pipeline > 1) {
    if (m.n_layer < p.pipeline * p.virtual_stages)
      throw UserError(origin + ": model.n_layer (" + std::to_string(m.n_layer) +
                      ") must be at least parallel.pipeline x "
                      "parallel.virtual_stages (" +
                      std::to_string(p.pipeline * p.virtual_stages) + "): every chunk holds at least one layer");
    need(p.micro_batches, "parallel.micro_batches", p.pipeline, "parallel.pipeline for schedule = \"interleaved\"");
  }
}

namespace {

// Every key the deck has, read through the table (deck_keys.cpp): unknown sections and
// keys first, then each key's type, then each key's range.
Deck read_keys(const toml::value& root, const std::string& origin) {
  const auto& table = root.as_table();
  for (const auto& [section, value] : table) {
    bool known = false;
    for (const auto& s : deck_sections()) known = known || s.name == section;
    if (!known) throw UserError(origin + ": unknown section [" + section + "]");
    if (!value.is_table()) throw UserError(origin + ": [" + section + "] must be a table");
    for (const auto& kv : value.as_table()) {
      bool declared = false;
      for (const auto& k : deck_keys()) declared = declared || (k.section == section && k.name == kv.first);
      if (!declared) throw UserError(origin + ": unknown key '" + section + "." + kv.first + "'");
    }
  }
  Deck d;
  d.path = origin;
  for (const auto& k : deck_keys()) {
    const auto s = table.find(k.section);
    if (s == table.end() || !s->second.as_table().count(k.name)) continue;
    try {
      k.set(d, s->second.as_table().at(k.name));
    } catch (const KeyProblem& p) {
      throw UserError(origin + ": " + k.section + "." + k.name + " " + p.why);
    }
  }
  // a key of the other model kind is refused, unless it holds its default: decks resolved
  // before the kinds had keys of their own (checkpoints' stored decks) wrote every key
  const Deck defaults;
  for (const auto& k : deck_keys()) {
    const auto s = table.find(k.section);
    if (s == table.end() || !s->second.as_table().count(k.name)) continue;
    const std::string why = k.misplaced(d);
    if (!why.empty() && format_deck_value(k.get(d)) != format_deck_value(k.get(defaults)))
      throw UserError(origin + ": " + k.section + "." + k.name + " " + why);
  }
  for (const auto& k : deck_keys())
    if (const std::string why = k.problem(d); !why.empty())
      throw UserError(origin + ": " + k.section + "." + k.name + " " + why);
  return d;
}

// The rules that tie keys together (each key's own range is in the table).
void check_cross_keys(const Deck& d, const std::string& origin) {
  const auto check = [&](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw UserError(origin + ": " + key + " " + why);
  };
  const auto& run = d.run;
  check(!run.name.empty() && run.name.find('/') == std::string::npos && run.name != "." && run.name != "..", "run.name",
        "must be a plain name: not empty, no '/', not '.' or '..' (got \"" + run.name + "\")");
  const auto& m = d.model;
  const bool resnet = m.kind == ModelKind::ResNet;
  const bool classifier = m.kind != ModelKind::GPT;  // the image classifiers: resnet, softmax
  check(classifier || m.n_embd % m.n_head == 0, "model.n_embd",
        "(" + std::to_string(m.n_embd) + ") must be a positive multiple of model.n_head (" + std::to_string(m.n_head) +
            ")");
  check(m.padded_vocab_size == 0 || m.padded_vocab_size >= m.vocab_size, "model.padded_vocab_size",
        "(" + std::to_string(m.padded_vocab_size) + ") must be 0 or at least model.vocab_size (" +
            std::to_string(m.vocab_size) + ")");
  const auto& data = d.data;
  check((data.kind == DataKind::Images) == classifier, "data.kind",
        "\"images\" goes with model.kind = \"resnet\" or \"softmax\" and the token kinds with \"gpt\"");
  check(data.kind != DataKind::Text || !data.files.empty(), "data.files",
        "must list at least one file or glob for kind = \"text\"");
  check(data.kind != DataKind::Text || m.vocab_size >= 256, "data.kind",
        "\"text\" is byte-level and needs model.vocab_size >= 256");
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
  const std::string grid = std::to_string(p.tensor_rows) + " x " + std::to_string(p.tensor_cols);
  if (p.tensor_mode == TensorMode::TwoD)
    check(p.tensor_rows == p.tensor_cols, "parallel.tensor_cols",
          "must equal tensor_rows for tensor_mode = \"2d\": the grid " + grid + " is not square");
  else
    check(p.tensor_rows == 1, "parallel.tensor_rows",
          "must be 1 for tensor_mode = \"1d\" (got " + grid + "; t is tensor_cols)");
  check(d.optim.min_lr <= d.optim.lr, "optim.min_lr", "must be in [0, optim.lr]");
  const auto& lp = d.layerpar;
  const bool mgrit = p.mgrit();
  check(!mgrit || resnet, "parallel.schedule",
        "\"mgrit\" is the residual network's layer-parallel solver (model.kind = \"resnet\")");
  check(!classifier || p.schedule != Schedule::XPipe, "parallel.schedule",
        "\"xpipe\" runs the GPT (its list exchanges the tied embedding); the residual network runs gpipe, 1f1b, zb-h1, "
        "zb-h2 or mgrit");
  check(!classifier || p.schedule != Schedule::Interleaved, "parallel.schedule",
        "\"interleaved\" runs the GPT (a stage holds several chunks of layers); the residual network runs gpipe, 1f1b, "
        "zb-h1, zb-h2 or mgrit");
  if (mgrit) {
    // cfactor^(levels-1) must divide the steps; it is multiplied out only while it cannot
    // overflow, and shown in floating point beyond that
    int64_t unit = 1;
    bool beyond = false;
    for (int64_t l = 1; l < lp.levels && !beyond; ++l) {
      beyond = unit > m.steps / lp.cfactor;
      if (!beyond) unit *= lp.cfactor;
    }
    const double power = std::pow(double(lp.cfactor), double(lp.levels - 1));
    check(!beyond && m.steps % unit == 0, "layerpar.levels",
          "and layerpar.cfactor do not fit: model.steps (" + std::to_string(m.steps) +
              ") must be a multiple of cfactor^(levels-1) (" +
              (power < 1e15 ? std::to_string(int64_t(power)) : toml::format(toml::value(power))) + ")");
    check(p.micro_batches == 1, "parallel.micro_batches",
          "must be 1 for schedule = \"mgrit\" (it solves whole batches)");
  }
  if (p.recompute == Recompute::Full && p.pipeline > 1 && p.schedule == Schedule::XPipe)
    throw UserError(origin +
                    ": parallel.recompute = \"full\" does not run with schedule = \"xpipe\": its backward sees "
                    "other weights than its forward, so a forward run again would not be the one it differentiates");
  if (p.zero > 0 && p.pipeline > 1 && p.schedule == Schedule::XPipe)
    throw UserError(origin +
                    ": parallel.zero = 1 does not run with schedule = \"xpipe\": its weight prediction and "
                    "per-stage updates read every parameter's AdamW moments");
  if (splits_backward(p.schedule) && p.pipeline > 1 && p.recompute != Recompute::None)
    throw UserError(origin + ": parallel.recompute = \"" + to_string(p.recompute) +
                    "\" does not run with schedule = \"" + to_string(p.schedule) +
                    "\": its weight halves run after other micro-batches' passes and need "
                    "each block's own activations, which recomputation does not keep");
  if (resnet && p.recompute == Recompute::Selective)
    throw UserError(origin +
                    ": parallel.recompute = \"selective\" is the GPT's: the residual network keeps only its "
                    "states already (each step's activation is remade in its backward); \"full\" keeps every k-th");
  if (p.sequence_parallel && (p.tensor_mode != TensorMode::OneD || p.tensor_cols == 1))
    throw UserError(origin + ": parallel.sequence_parallel applies to tensor_mode = \"1d\" with tensor_cols > 1" +
                    (p.tensor_mode == TensorMode::TwoD
                         ? std::string(": the 2D split keeps every activation in (batch / q) x (C / q) blocks "
                                       "already, with no region replicated over the tensor group to split")
                         : std::string(": without a tensor split no region is replicated")));
  if (p.sequence_parallel && splits_backward(p.schedule) && p.pipeline > 1)
    throw UserError(origin + ": parallel.sequence_parallel does not run with schedule = \"" + to_string(p.schedule) +
                    "\": a block's weight half reads the output gradients its input half gathered over the tensor "
                    "group, which the zero-bubble schedules would have to gather again");
  if (d.model.moe_experts > 0 && p.tensor_mode == TensorMode::TwoD)
    throw UserError(origin +
                    ": model.moe_experts does not run with tensor_mode = \"2d\": the 2D split keeps the "
                    "activations in (batch / q) x (C / q) blocks, and a mixture routes whole tokens (use tensor_mode = "
                    "\"1d\", whose tensor ranks route a share of the tokens each)");
  if (classifier && p.context > 1)
    throw UserError(origin + ": parallel.context is the GPT's (it splits a sequence's tokens); the " +
                    std::string(resnet ? "residual network" : "softmax regression") +
                    "'s samples are not sequences: use parallel.data");
  if (mgrit && p.recompute != Recompute::None)
    throw UserError(origin +
                    ": parallel.recompute does not apply to schedule = \"mgrit\" (its solver keeps the "
                    "states at its own points)");
  if (classifier && (p.tensor_rows > 1 || p.tensor_cols > 1))
    throw UserError(
        origin + ": model.kind = \"" + to_string(m.kind) + "\" has no tensor split: it runs " +
        (resnet ? "data x pipeline (gpipe, 1f1b, zb-h1, zb-h2) or data x layer-parallel (mgrit)" : "data parallelism"));
  if (data.batch_size % p.data != 0)
    throw UserError(origin + ": data.batch_size (" + std::to_string(data.batch_size) +
                    ") must be divisible by parallel.data (" + std::to_string(p.data) + ")");
}

std::string resolved_toml(const Deck& d) {
  std::string out = "# resolved deck (defaults and --set overrides applied); source: " + d.path + "\n";
  for (const auto& s : deck_sections()) {
    out += (s.name == deck_sections().front().name ? "[" : "\n[") + s.name + "]\n";
    for (const auto& k : deck_keys())
      if (k.section == s.name && k.misplaced(d).empty()) out += k.name + " = " + format_deck_value(k.get(d)) + "\n";
  }
  return out;
}

}  // namespace

std::string layout_name(const ParallelConfig& p) {
  std::string s = "data=" + std::to_string(p.data);
  if (p.mgrit()) {
    s += " pipeline=" + std::to_string(p.pipeline) + ":mgrit";
  } else if (p.pipeline > 1) {
    s += " pipeline=" + std::to_string(p.pipeline) + ":" + to_string(p.schedule);
    if (p.schedule == Schedule::Interleaved) s += ":v" + std::to_string(p.virtual_stages);
    s += ":" + std::to_string(p.micro_batches) + "mb";
  } else if (p.micro_batches > 1) {
    s += ":" + std::to_string(p.micro_batches) + "mb";  // gradient accumulation
  }
  if (p.context > 1)
    s += " context=" + std::to_string(p.context) + (p.context_mode == ContextMode::AllToAll ? ":a2a" : "");
  if (p.tensor_mode == TensorMode::TwoD)
    s += " tensor=2d:" + std::to_string(p.tensor_rows) + "x" + std::to_string(p.tensor_cols);
  else if (p.tensor_cols > 1)
    s += " tensor=1d:" + std::to_string(p.tensor_cols) + (p.sequence_parallel ? ":sp" : "");
  if (p.recompute != Recompute::None) s += " recompute=" + to_string(p.recompute);
  if (p.expert > 1) s += " expert=" + std::to_string(p.expert);
  if (p.zero > 0) s += " zero=" + std::to_string(p.zero);
  return s;
}

Deck parse_deck(const std::string& toml_text, const std::string& origin, const std::vector<std::string>& overrides) {
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
  Deck d = read_keys(root, origin);
  check_cross_keys(d, origin);
  check_model_fits_grid(d, origin);
  d.resolved_toml = resolved_toml(d);
  return d;
}

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_deck(read_toml_file(path, "deck"), path, overrides);
}

}  // namespace strata
