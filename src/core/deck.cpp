#include "core/deck.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <toml.hpp>

#include "core/error.hpp"

namespace strata {
namespace {

// Reads one section of the deck, remembering which keys it consumed so that whatever is
// left over can be reported as unknown.
class SectionReader {
 public:
  SectionReader(const toml::value& root, std::string section, std::string origin)
      : section_(std::move(section)), origin_(std::move(origin)) {
    if (root.contains(section_)) {
      if (!root.at(section_).is_table())
        throw UserError(origin_ + ": [" + section_ + "] must be a table");
      table_ = &root.at(section_).as_table();
    }
  }

  void read(const char* key, std::string& out) {
    if (auto* v = find(key)) {
      if (!v->is_string()) type_error(key, "a string", *v);
      out = v->as_string();
    }
  }
  void read(const char* key, int64_t& out) {
    if (auto* v = find(key)) {
      if (!v->is_integer()) type_error(key, "an integer", *v);
      out = v->as_integer();
    }
  }
  void read(const char* key, bool& out) {
    if (auto* v = find(key)) {
      if (!v->is_boolean()) type_error(key, "true or false", *v);
      out = v->as_boolean();
    }
  }
  void read(const char* key, uint64_t& out) {
    int64_t x = int64_t(out);
    read(key, x);
    if (x < 0) fail(key, "must be >= 0");
    out = uint64_t(x);
  }
  void read(const char* key, double& out) {
    if (auto* v = find(key)) {
      if (v->is_floating()) out = v->as_floating();
      else if (v->is_integer()) out = double(v->as_integer());
      else type_error(key, "a number", *v);
      if (!std::isfinite(out)) fail(key, "must be a finite number (got " + toml::format(*v) + ")");
    }
  }
  void read(const char* key, std::vector<std::string>& out) {
    if (auto* v = find(key)) {
      if (v->is_string()) { out = {v->as_string()}; return; }
      if (!v->is_array()) type_error(key, "an array of strings", *v);
      out.clear();
      for (const auto& e : v->as_array()) {
        if (!e.is_string()) type_error(key, "an array of strings", *v);
        out.push_back(e.as_string());
      }
    }
  }

  // Errors for a value that parsed but is out of range.
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw UserError(origin_ + ": " + section_ + "." + key + " " + why);
  }
  void check(bool ok, const std::string& key, const std::string& why) const {
    if (!ok) fail(key, why);
  }

  void reject_unknown() const {
    if (!table_) return;
    for (const auto& kv : *table_)
      if (!seen_.count(kv.first))
        throw UserError(origin_ + ": unknown key '" + section_ + "." + kv.first + "'");
  }

 private:
  const toml::value* find(const char* key) {
    seen_.insert(key);
    if (!table_) return nullptr;
    auto it = table_->find(key);
    return it == table_->end() ? nullptr : &it->second;
  }
  [[noreturn]] void type_error(const std::string& key, const char* want, const toml::value& got) const {
    std::ostringstream os;
    os << origin_ << ": " << section_ << "." << key << " must be " << want << ", got " << got.type();
    throw UserError(os.str());
  }

  std::string section_, origin_;
  const toml::table* table_ = nullptr;
  std::set<std::string> seen_;
};

// Applies one "section.key=value" override to the parsed document.
void apply_override(toml::value& root, const std::string& spec, const std::string& origin) {
  const auto eq = spec.find('=');
  const auto dot = spec.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq)
    throw UserError("--set '" + spec + "': expected section.key=value");
  const std::string section = spec.substr(0, dot), key = spec.substr(dot + 1, eq - dot - 1);
  const std::string text = spec.substr(eq + 1);
  toml::value value;
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
  if (p.tensor_mode == "1d" && p.tensor_cols > 1) {
    const int64_t t = p.tensor_cols;
    need(m.n_head, "model.n_head", t, "parallel.tensor_cols");
    need(4 * m.n_embd, "4 x model.n_embd", t, "parallel.tensor_cols");
    need(m.vocab_size, "model.vocab_size", t, "parallel.tensor_cols");
  }
  need(d.data.batch_size / p.data, "data.batch_size / parallel.data", p.micro_batches, "parallel.micro_batches");
  if (p.tensor_mode == "2d" && p.tensor_rows > 1) {
    const int64_t q = p.tensor_rows;
    need(m.n_head, "model.n_head", q, "q = parallel.tensor_rows");
    need(m.n_embd, "model.n_embd", q * q, "q^2");
    need(m.vocab_size, "model.vocab_size", q, "q = parallel.tensor_rows");
    need(d.data.batch_size / p.data / p.micro_batches, "data.batch_size / parallel.data / parallel.micro_batches", q,
         "q = parallel.tensor_rows");
  }
  if (m.n_layer < p.pipeline)
    throw UserError(origin + ": model.n_layer (" + std::to_string(m.n_layer) + ") must be at least parallel.pipeline (" +
                    std::to_string(p.pipeline) + "): every stage holds at least one layer");
}

namespace {

Deck read_sections(toml::value& root, const std::string& origin) {
  static const std::set<std::string> known = {"run", "model", "data", "parallel", "optim", "layerpar"};
  for (const auto& kv : root.as_table())
    if (!known.count(kv.first)) throw UserError(origin + ": unknown section [" + kv.first + "]");

  Deck d;
  d.path = origin;
  {
    SectionReader s(root, "run", origin);
    auto& c = d.run;
    s.read("name", c.name);
    s.read("out_dir", c.out_dir);
    s.read("steps", c.steps);
    s.read("log_every", c.log_every);
    s.read("val_every", c.val_every);
    s.read("val_batches", c.val_batches);
    s.read("seed", c.seed);
    s.read("checkpoint_every", c.checkpoint_every);
    s.read("keep_checkpoints", c.keep_checkpoints);
    s.read("max_walltime", c.max_walltime);
    s.read("on_nonfinite", c.on_nonfinite);
    s.read("max_skipped_steps", c.max_skipped_steps);
    s.read("stop_timeout", c.stop_timeout);
    s.reject_unknown();
    s.check(c.on_nonfinite == "stop" || c.on_nonfinite == "skip", "on_nonfinite",
            "must be \"stop\" or \"skip\" (got \"" + c.on_nonfinite + "\")");
    s.check(c.max_skipped_steps >= 1, "max_skipped_steps", "must be >= 1");
    s.check(c.stop_timeout >= 0, "stop_timeout", "must be >= 0 (seconds)");
    s.check(c.checkpoint_every >= 0, "checkpoint_every", "must be >= 0");
    s.check(c.keep_checkpoints >= 1, "keep_checkpoints", "must be >= 1");
    s.check(c.max_walltime >= 0, "max_walltime", "must be >= 0 (seconds)");
    s.check(!c.name.empty() && c.name.find('/') == std::string::npos && c.name != "." && c.name != "..", "name",
            "must be a plain name: not empty, no '/', not '.' or '..' (got \"" + c.name + "\")");
    s.check(c.steps >= 1, "steps", "must be >= 1");
    s.check(c.log_every >= 1, "log_every", "must be >= 1");
    s.check(c.val_every >= 0, "val_every", "must be >= 0");
    s.check(c.val_batches >= 1, "val_batches", "must be >= 1");
  }
  {
    SectionReader s(root, "model", origin);
    auto& c = d.model;
    s.read("kind", c.kind);
    s.read("n_layer", c.n_layer);
    s.read("n_embd", c.n_embd);
    s.read("n_head", c.n_head);
    s.read("vocab_size", c.vocab_size);
    s.read("seq_len", c.seq_len);
    s.read("init_std", c.init_std);
    s.read("t_final", c.t_final);
    s.read("step_init_std", c.step_init_std);
    s.read("channels", c.channels);
    s.reject_unknown();
    s.check(c.channels >= 0, "channels", "must be >= 0");
    s.check(c.channels == 0 || c.kind == "resnet", "channels", "applies to kind = \"resnet\" only");
    s.check(c.kind == "gpt" || c.kind == "resnet", "kind", "must be \"gpt\" or \"resnet\" (got \"" + c.kind + "\")");
    s.check(c.t_final > 0, "t_final", "must be > 0");
    s.check(c.step_init_std >= 0, "step_init_std", "must be >= 0");
    s.check(c.n_layer >= 1, "n_layer", "must be >= 1");
    s.check(c.n_head >= 1, "n_head", "must be >= 1");
    s.check(c.n_embd >= 1 && (c.kind != "gpt" || c.n_embd % c.n_head == 0), "n_embd",
            "(" + std::to_string(c.n_embd) + ") must be a positive multiple of model.n_head (" +
                std::to_string(c.n_head) + ")");
    s.check(c.vocab_size >= 2, "vocab_size", "must be >= 2");
    s.check(c.seq_len >= 1, "seq_len", "must be >= 1");
    s.check(c.init_std > 0, "init_std", "must be > 0");
  }
  {
    SectionReader s(root, "data", origin);
    auto& c = d.data;
    s.read("kind", c.kind);
    s.read("files", c.files);
    s.read("dir", c.dir);
    s.read("val_fraction", c.val_fraction);
    s.read("batch_size", c.batch_size);
    s.reject_unknown();
    s.check(c.kind == "text" || c.kind == "random" || c.kind == "images", "kind",
            "must be \"text\", \"random\" or \"images\" (got \"" + c.kind + "\")");
    s.check((c.kind == "images") == (d.model.kind == "resnet"), "kind",
            "\"images\" goes with model.kind = \"resnet\" and the token kinds with \"gpt\"");
    s.check(c.kind != "text" || !c.files.empty(), "files", "must list at least one file or glob for kind = \"text\"");
    s.check(c.val_fraction > 0 && c.val_fraction < 1, "val_fraction", "must be in (0, 1)");
    s.check(c.batch_size >= 1, "batch_size", "must be >= 1");
    if (c.kind == "text")
      s.check(d.model.vocab_size >= 256, "kind", "\"text\" is byte-level and needs model.vocab_size >= 256");
  }
  {
    SectionReader s(root, "parallel", origin);
    auto& c = d.parallel;
    s.read("data", c.data);
    s.read("pipeline", c.pipeline);
    s.read("tensor_rows", c.tensor_rows);
    s.read("tensor_cols", c.tensor_cols);
    s.read("tensor_mode", c.tensor_mode);
    s.read("comm_backend", d.parallel.comm_backend);
    s.read("grad_bucket_mb", d.parallel.grad_bucket_mb);
    s.read("micro_batches", c.micro_batches);
    s.read("schedule", c.schedule);
    s.read("weight_prediction", c.weight_prediction);
    s.read("measure_staleness", c.measure_staleness);
    s.reject_unknown();
    s.check(c.micro_batches >= 1, "micro_batches", "must be >= 1");
    s.check(c.schedule == "gpipe" || c.schedule == "1f1b" || c.schedule == "xpipe", "schedule",
            "must be \"gpipe\", \"1f1b\" or \"xpipe\" (got \"" + c.schedule + "\")");
    s.check(c.weight_prediction || c.schedule == "xpipe", "weight_prediction", "applies to schedule = \"xpipe\" only");
    s.check(!c.measure_staleness || c.schedule == "xpipe", "measure_staleness", "applies to schedule = \"xpipe\" only");
    s.check(d.parallel.grad_bucket_mb >= 0, "grad_bucket_mb", "must be >= 0");
    s.check(c.data >= 1, "data", "must be >= 1");
    s.check(c.pipeline >= 1, "pipeline", "must be >= 1");
    s.check(c.tensor_rows >= 1, "tensor_rows", "must be >= 1");
    s.check(c.tensor_cols >= 1, "tensor_cols", "must be >= 1");
    s.check(c.tensor_mode == "1d" || c.tensor_mode == "2d", "tensor_mode",
            "must be \"1d\" or \"2d\" (got \"" + c.tensor_mode + "\")");
    const std::string grid = std::to_string(c.tensor_rows) + " x " + std::to_string(c.tensor_cols);
    if (c.tensor_mode == "1d")
      s.check(c.tensor_rows == 1, "tensor_rows", "must be 1 for tensor_mode = \"1d\" (got " + grid + "; t is tensor_cols)");
    else
      s.check(c.tensor_rows == c.tensor_cols, "tensor_cols", "must equal tensor_rows for tensor_mode = \"2d\": the grid " + grid + " is not square");
    s.check(d.parallel.comm_backend == "mpi" || d.parallel.comm_backend == "nccl", "comm_backend",
            "must be \"mpi\" or \"nccl\" (got \"" + d.parallel.comm_backend + "\")");
  }
  {
    SectionReader s(root, "optim", origin);
    auto& c = d.optim;
    s.read("lr", c.lr);
    s.read("min_lr", c.min_lr);
    s.read("warmup_steps", c.warmup_steps);
    s.read("weight_decay", c.weight_decay);
    s.read("beta1", c.beta1);
    s.read("beta2", c.beta2);
    s.read("eps", c.eps);
    s.read("grad_clip", c.grad_clip);
    s.reject_unknown();
    s.check(c.lr > 0, "lr", "must be > 0");
    s.check(c.min_lr >= 0 && c.min_lr <= c.lr, "min_lr", "must be in [0, optim.lr]");
    s.check(c.warmup_steps >= 0, "warmup_steps", "must be >= 0");
    s.check(c.weight_decay >= 0, "weight_decay", "must be >= 0");
    s.check(c.beta1 >= 0 && c.beta1 < 1, "beta1", "must be in [0, 1)");
    s.check(c.beta2 >= 0 && c.beta2 < 1, "beta2", "must be in [0, 1)");
    s.check(c.eps > 0, "eps", "must be > 0");
    s.check(c.grad_clip >= 0, "grad_clip", "must be >= 0");
  }
  {
    SectionReader s(root, "layerpar", origin);
    auto& c = d.layerpar;
    s.read("levels", c.levels);
    s.read("cfactor", c.cfactor);
    s.read("fwd_iterations", c.fwd_iterations);
    s.read("bwd_iterations", c.bwd_iterations);
    s.read("tolerance", c.tolerance);
    s.read("relaxation", c.relaxation);
    s.read("warm_start", c.warm_start);
    s.reject_unknown();
    s.check(c.levels >= 1, "levels", "must be >= 1");
    s.check(c.cfactor >= 2, "cfactor", "must be >= 2");
    s.check(c.fwd_iterations >= 1, "fwd_iterations", "must be >= 1");
    s.check(c.bwd_iterations >= 1, "bwd_iterations", "must be >= 1");
    s.check(c.tolerance >= 0, "tolerance", "must be >= 0");
    s.check(c.relaxation == "F" || c.relaxation == "FCF", "relaxation", "must be \"F\" or \"FCF\" (got \"" + c.relaxation + "\")");
    if (d.model.kind == "resnet") {
      // cfactor^(levels-1) must divide n_layer; it is multiplied out only while it cannot
      // overflow, and shown in floating point beyond that
      int64_t unit = 1;
      bool beyond = false;
      for (int64_t l = 1; l < c.levels && !beyond; ++l) {
        beyond = unit > d.model.n_layer / c.cfactor;
        if (!beyond) unit *= c.cfactor;
      }
      const double power = std::pow(double(c.cfactor), double(c.levels - 1));
      s.check(!beyond && d.model.n_layer % unit == 0, "levels",
              "and layerpar.cfactor do not fit: model.n_layer (" + std::to_string(d.model.n_layer) +
                  ") must be a multiple of cfactor^(levels-1) (" +
                  (power < 1e15 ? std::to_string(int64_t(power)) : toml::format(toml::value(power))) + ")");
    }
  }
  if (d.model.kind == "resnet" && (d.parallel.tensor_rows > 1 || d.parallel.tensor_cols > 1 || d.parallel.micro_batches > 1))
    throw UserError(origin + ": model.kind = \"resnet\" runs data x layer-parallel (parallel.data x parallel.pipeline) only: "
                    "no tensor split, no micro-batches");
  if (d.data.batch_size % d.parallel.data != 0)
    throw UserError(origin + ": data.batch_size (" + std::to_string(d.data.batch_size) +
                    ") must be divisible by parallel.data (" + std::to_string(d.parallel.data) + ")");
  check_model_fits_grid(d, origin);
  return d;
}

std::string resolved_toml(const Deck& d) {
  auto q = [](const std::string& s) { return toml::format(toml::value(s)); };
  std::ostringstream os;
  os.precision(17);
  os << "# resolved deck (defaults and --set overrides applied); source: " << d.path << "\n";
  os << "[run]\nname = " << q(d.run.name) << "\nout_dir = " << q(d.run.out_dir) << "\nsteps = " << d.run.steps
     << "\nlog_every = " << d.run.log_every << "\nval_every = " << d.run.val_every
     << "\nval_batches = " << d.run.val_batches << "\nseed = " << d.run.seed
     << "\ncheckpoint_every = " << d.run.checkpoint_every << "\nkeep_checkpoints = " << d.run.keep_checkpoints
     << "\nmax_walltime = " << d.run.max_walltime << "\non_nonfinite = " << q(d.run.on_nonfinite)
     << "\nmax_skipped_steps = " << d.run.max_skipped_steps << "\nstop_timeout = " << d.run.stop_timeout << "\n\n";
  os << "[model]\nkind = " << q(d.model.kind) << "\nn_layer = " << d.model.n_layer << "\nn_embd = " << d.model.n_embd
     << "\nn_head = " << d.model.n_head << "\nvocab_size = " << d.model.vocab_size
     << "\nseq_len = " << d.model.seq_len << "\ninit_std = " << d.model.init_std << "\nt_final = " << d.model.t_final
     << "\nstep_init_std = " << d.model.step_init_std << "\nchannels = " << d.model.channels << "\n\n";
  os << "[data]\nkind = " << q(d.data.kind) << "\nfiles = [";
  for (size_t i = 0; i < d.data.files.size(); ++i) os << (i ? ", " : "") << q(d.data.files[i]);
  os << "]\ndir = " << q(d.data.dir) << "\nval_fraction = " << d.data.val_fraction << "\nbatch_size = " << d.data.batch_size << "\n\n";
  os << "[parallel]\ndata = " << d.parallel.data << "\npipeline = " << d.parallel.pipeline
     << "\ntensor_rows = " << d.parallel.tensor_rows << "\ntensor_cols = " << d.parallel.tensor_cols
     << "\ntensor_mode = " << q(d.parallel.tensor_mode) << "\ncomm_backend = " << q(d.parallel.comm_backend)
     << "\ngrad_bucket_mb = " << d.parallel.grad_bucket_mb << "\nmicro_batches = " << d.parallel.micro_batches
     << "\nschedule = " << q(d.parallel.schedule)
     << "\nweight_prediction = " << (d.parallel.weight_prediction ? "true" : "false")
     << "\nmeasure_staleness = " << (d.parallel.measure_staleness ? "true" : "false") << "\n\n";
  os << "[optim]\nlr = " << d.optim.lr << "\nmin_lr = " << d.optim.min_lr << "\nwarmup_steps = " << d.optim.warmup_steps
     << "\nweight_decay = " << d.optim.weight_decay << "\nbeta1 = " << d.optim.beta1 << "\nbeta2 = " << d.optim.beta2
     << "\neps = " << d.optim.eps << "\ngrad_clip = " << d.optim.grad_clip << "\n\n";
  os << "[layerpar]\nlevels = " << d.layerpar.levels << "\ncfactor = " << d.layerpar.cfactor
     << "\nfwd_iterations = " << d.layerpar.fwd_iterations << "\nbwd_iterations = " << d.layerpar.bwd_iterations
     << "\ntolerance = " << d.layerpar.tolerance << "\nrelaxation = " << q(d.layerpar.relaxation)
     << "\nwarm_start = " << (d.layerpar.warm_start ? "true" : "false") << "\n";
  return os.str();
}

}  // namespace

Deck parse_deck(const std::string& toml_text, const std::string& origin, const std::vector<std::string>& overrides) {
  toml::value root;
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
  Deck d = read_sections(root, origin);
  d.resolved_toml = resolved_toml(d);
  return d;
}

Deck load_deck(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot open deck '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_deck(ss.str(), path, overrides);
}

}  // namespace strata
