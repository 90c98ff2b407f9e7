#include "plan/machine_file.hpp"

#include <toml.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/toml_text.hpp"

namespace strata {

double LinkCosts::seconds(Collective kind, int ranks, double payload_bytes) const {
  switch (kind) {
    case Collective::Send:
      return collective_seconds(kind, ranks, payload_bytes, send_alpha, send_beta);
    case Collective::Broadcast:
    case Collective::Reduce:
      return collective_seconds(kind, ranks, payload_bytes, broadcast_alpha, broadcast_beta);
    default:
      return collective_seconds(kind, ranks, payload_bytes, allreduce_alpha, allreduce_beta);
  }
}

namespace {

class Reader {
 public:
  Reader(const toml::value& root, std::string path) : root_(root), path_(std::move(path)) {}
  const toml::table& section(const std::string& name, const std::set<std::string>& keys) {
    if (!root_.is_table() || !root_.as_table().count(name) || !root_.as_table().at(name).is_table())
      throw UserError("machine file '" + path_ + "': no [" + name + "] section");
    const auto& t = root_.as_table().at(name).as_table();
    for (const auto& [k, v] : t)
      if (!keys.count(k)) throw UserError("machine file '" + path_ + "': unknown key " + name + "." + k);
    return t;
  }
  double number(const toml::table& t, const std::string& sec, const std::string& key, bool positive = true) {
    if (!t.count(key)) throw UserError("machine file '" + path_ + "': missing " + sec + "." + key);
    const auto& v = t.at(key);
    double x = 0;
    if (v.is_floating())
      x = v.as_floating();
    else if (v.is_integer())
      x = double(v.as_integer());
    else
      throw UserError("machine file '" + path_ + "': " + sec + "." + key + " must be a number");
    if (positive ? !(x > 0) : !(x >= 0))
      throw UserError("machine file '" + path_ + "': " + sec + "." + key + " must be " + (positive ? "> 0" : ">= 0"));
    return x;
  }
  std::string text(const toml::table& t, const std::string& sec, const std::string& key) {
    if (!t.count(key) || !t.at(key).is_string())
      throw UserError("machine file '" + path_ + "': " + sec + "." + key + " must be a string");
    return t.at(key).as_string();
  }
  LinkCosts link(const std::string& name) {
    const std::set<std::string> keys = {"send_alpha",     "send_beta",       "allreduce_alpha",
                                        "allreduce_beta", "broadcast_alpha", "broadcast_beta"};
    const auto& t = section(name, keys);
    LinkCosts c;
    c.send_alpha = number(t, name, "send_alpha", false);
    c.send_beta = number(t, name, "send_beta", false);
    c.allreduce_alpha = number(t, name, "allreduce_alpha", false);
    c.allreduce_beta = number(t, name, "allreduce_beta", false);
    c.broadcast_alpha = number(t, name, "broadcast_alpha", false);
    c.broadcast_beta = number(t, name, "broadcast_beta", false);
    return c;
  }
  bool has(const std::string& name) const { return root_.is_table() && root_.as_table().count(name); }
  // an array of positive numbers
  std::vector<double> numbers(const toml::table& t, const std::string& sec, const std::string& key) {
    if (!t.count(key) || !t.at(key).is_array())
      throw UserError("machine file '" + path_ + "': " + sec + "." + key + " must be an array of numbers");
    std::vector<double> out;
    for (const auto& v : t.at(key).as_array()) {
      const double x = v.is_floating() ? v.as_floating() : v.is_integer() ? double(v.as_integer()) : -1.0;
      if (!(x > 0)) throw UserError("machine file '" + path_ + "': " + sec + "." + key + " must hold numbers > 0");
      out.push_back(x);
    }
    return out;
  }
  ThreadScaling scaling() {
    const auto& t = section("threads", {"counts", "gemm", "bf16_gemm", "memory", "activation"});
    ThreadScaling s;
    for (const double c : numbers(t, "threads", "counts")) s.counts.push_back(int(c));
    s.gemm = numbers(t, "threads", "gemm");
    if (t.count("bf16_gemm")) s.bf16_gemm = numbers(t, "threads", "bf16_gemm");
    s.memory = numbers(t, "threads", "memory");
    if (t.count("activation")) s.activation = numbers(t, "threads", "activation");
    const auto bad = [&](const std::string& why) {
      return UserError("machine file '" + path_ + "': [threads] " + why);
    };
    if (s.counts.empty() || s.counts[0] != 1) throw bad("counts must start at 1");
    for (size_t i = 1; i < s.counts.size(); ++i)
      if (s.counts[i] <= s.counts[i - 1]) throw bad("counts must rise");
    for (const auto* v : {&s.gemm, &s.bf16_gemm, &s.memory, &s.activation})
      if (!(v->empty() && v != &s.gemm && v != &s.memory) && v->size() != s.counts.size())
        throw bad("gemm, bf16_gemm, memory and activation need one value per count");
    return s;
  }

 private:
  const toml::value& root_;
  std::string path_;
};

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // a TOML float
  return s;
}

std::string gbps(double beta) { return beta > 0 ? "   # " + num(1e-9 / beta) + " GB/s" : ""; }

void write_link(std::ostringstream& o, const char* name, const LinkCosts& c) {
  o << "\n[" << name
    << "]   # t = steps(p) alpha + wire(p) bytes beta (src/comm/wire_model.hpp); alpha in s, beta in s/byte\n"
    << "send_alpha = " << num(c.send_alpha) << "\nsend_beta = " << num(c.send_beta) << gbps(c.send_beta) << "\n"
    << "allreduce_alpha = " << num(c.allreduce_alpha) << "\nallreduce_beta = " << num(c.allreduce_beta)
    << gbps(c.allreduce_beta) << "\n"
    << "broadcast_alpha = " << num(c.broadcast_alpha) << "\nbroadcast_beta = " << num(c.broadcast_beta)
    << gbps(c.broadcast_beta) << "\n";
}

}  // namespace

MachineFile read_machine_file(const std::string& path) {
  const std::string text = read_toml_file(path, "machine file");
  check_toml_text(text, path);
  toml::value root;
  try {
    std::istringstream is(text);
    root = toml::parse(is, path);
  } catch (const std::exception& e) {
    throw UserError("machine file '" + path + "' is not valid TOML");
  }
  Reader r(root, path);
  for (const auto& [k, v] : root.as_table())
    if (k != "machine" && k != "compute" && k != "threads" && k != "intra_node" && k != "inter_node")
      throw UserError("machine file '" + path + "': unknown section [" + k + "]");
  MachineFile m;
  const auto& mt = r.section("machine", {"name", "description", "source", "ranks_per_node", "cores_per_node"});
  m.name = r.text(mt, "machine", "name");
  m.description = r.text(mt, "machine", "description");
  m.source = r.text(mt, "machine", "source");
  m.ranks_per_node = int(r.number(mt, "machine", "ranks_per_node"));
  if (mt.count("cores_per_node")) m.cores_per_node = int(r.number(mt, "machine", "cores_per_node"));
  const auto& ct = r.section("compute", {"threads_per_rank", "gemm_flops", "bf16_gemm_flops", "attention_flops",
                                         "bf16_attention_flops", "bf16_rounding", "memory_bandwidth", "memory_capacity",
                                         "activation_rate", "adam_rate", "int8_rate", "powersgd_rate"});
  if (ct.count("threads_per_rank")) m.threads_per_rank = int(r.number(ct, "compute", "threads_per_rank"));
  m.gemm_flops = r.number(ct, "compute", "gemm_flops");
  if (ct.count("bf16_gemm_flops")) m.bf16_gemm_flops = r.number(ct, "compute", "bf16_gemm_flops");
  if (ct.count("attention_flops")) m.attention_flops = r.number(ct, "compute", "attention_flops");
  if (ct.count("bf16_attention_flops")) m.bf16_attention_flops = r.number(ct, "compute", "bf16_attention_flops");
  if (ct.count("bf16_rounding")) {
    const std::string rounding = r.text(ct, "compute", "bf16_rounding");
    if (rounding != "separate" && rounding != "in_product")
      throw UserError("machine file '" + path + "': compute.bf16_rounding is \"" + rounding +
                      "\"; it must be \"separate\" or \"in_product\"");
    m.bf16_rounds_in_product = rounding == "in_product";
  }
  m.memory_bandwidth = r.number(ct, "compute", "memory_bandwidth");
  m.memory_capacity = r.number(ct, "compute", "memory_capacity");
  m.activation_rate = r.number(ct, "compute", "activation_rate");
  m.adam_rate = r.number(ct, "compute", "adam_rate");
  if (ct.count("int8_rate")) m.int8_rate = r.number(ct, "compute", "int8_rate");
  if (ct.count("powersgd_rate")) m.powersgd_rate = r.number(ct, "compute", "powersgd_rate");
  if (r.has("threads")) m.threads = r.scaling();
  m.intra_node = r.link("intra_node");
  m.has_inter_node = r.has("inter_node");
  if (m.has_inter_node) m.inter_node = r.link("inter_node");
  return m;
}

double ThreadScaling::speedup(const std::vector<double>& s, int t) const {
  if (counts.empty() || s.empty()) return double(t);
  size_t i = 0;
  while (i + 1 < counts.size() && counts[i + 1] <= t) ++i;
  if (counts[i] == t) return s[i];
  if (i + 1 < counts.size()) {  // between two measured counts
    const double x = double(t - counts[i]) / double(counts[i + 1] - counts[i]);
    return s[i] + x * (s[i + 1] - s[i]);
  }
  // past the largest count n, speed-up S: Amdahl's serial share f from S = 1 / (f + (1 - f) / n)
  const double n = double(counts.back()), speed = s.back();
  const double f = n > 1 ? std::clamp((n / speed - 1.0) / (n - 1.0), 0.0, 1.0) : 0.0;
  return 1.0 / (f + (1.0 - f) / double(t));
}

MachineFile MachineFile::at_threads(int t) const {
  const int cores = node_cores();
  if (t < 1 || cores % t != 0)
    throw UserError("machine '" + name + "' has " + std::to_string(cores) + " cores per node: " + std::to_string(t) +
                    " threads per rank do not divide them");
  MachineFile m = *this;
  const int was = threads_per_rank;
  const auto scale = [&](const std::vector<double>& s) { return threads.speedup(s, t) / threads.speedup(s, was); };
  const double gemm = scale(threads.gemm), memory = scale(threads.memory);
  const double activation = threads.activation.empty() ? memory : scale(threads.activation);
  const double bf16 = threads.bf16_gemm.empty() ? gemm : scale(threads.bf16_gemm);
  m.gemm_flops *= gemm;
  m.bf16_gemm_flops *= bf16;
  m.attention_flops *= gemm;
  m.bf16_attention_flops *= bf16;
  m.memory_bandwidth *= memory;
  m.activation_rate *= activation;
  m.adam_rate *= memory;
  m.threads_per_rank = t;
  m.cores_per_node = cores;
  m.ranks_per_node = cores / t;
  m.memory_capacity = memory_capacity * double(ranks_per_node) / double(m.ranks_per_node);
  return m;
}

double MachineFile::gemm_rate(Precision precision) const {
  if (precision == Precision::FP32) return gemm_flops;
  if (!(bf16_gemm_flops > 0))
    throw UserError("machine '" + name +
                    "' has no compute.bf16_gemm_flops: it cannot plan model.precision = \"bf16\" "
                    "(strata calibrate measures it where bf16 products run)");
  return bf16_gemm_flops;
}

std::string to_toml(const MachineFile& m) {
  auto q = [](const std::string& s) {  // a one-line TOML basic string
    std::string out = "\"";
    for (const char ch : s) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += (ch == '\n' || ch == '\t') ? ' ' : ch;
    }
    return out + "\"";
  };
  std::ostringstream o;
  o << "[machine]\nname = " << q(m.name) << "\ndescription = " << q(m.description) << "\nsource = " << q(m.source)
    << "\nranks_per_node = " << m.ranks_per_node << "\n";
  if (m.cores_per_node > 0) o << "cores_per_node = " << m.cores_per_node << "\n";
  o << "\n[compute]\nthreads_per_rank = " << m.threads_per_rank
    << "   # the threads each rank ran: every rate below is one rank's at that count\n"
    << "gemm_flops = " << num(m.gemm_flops) << "         # FLOP/s per rank, float GEMM at the model's shapes\n";
  if (m.bf16_gemm_flops > 0)
    o << "bf16_gemm_flops = " << num(m.bf16_gemm_flops) << "    # the same with bf16 operands, fp32 sums\n";
  if (m.bf16_gemm_flops > 0)
    o << "bf16_rounding = " << (m.bf16_rounds_in_product ? "\"in_product\"" : "\"separate\"")
      << "    # where bf16 products round their operands (separate: strata keeps bf16 copies)\n";
  if (m.attention_flops > 0)
    o << "attention_flops = " << num(m.attention_flops)
      << "    # FLOP/s per rank, fused attention forward + backward (unmasked work) at the model's shapes\n";
  if (m.bf16_attention_flops > 0)
    o << "bf16_attention_flops = " << num(m.bf16_attention_flops) << "    # the same with bf16 products\n";
  o << "memory_bandwidth = " << num(m.memory_bandwidth) << "   # bytes/s per rank, streaming\n"
    << "memory_capacity = " << num(m.memory_capacity)
    << "    # bytes a rank may use (its share of the node's, or its GPU's)\n"
    << "activation_rate = " << num(m.activation_rate)
    << "    # bytes of kept activations per second through the non-GEMM work (forward + backward)\n"
    << "adam_rate = " << num(m.adam_rate)
    << "    # parameters per second through an Adam-style pass (the update; XPipe's prediction)\n";
  if (m.int8_rate > 0)
    o << "int8_rate = " << num(m.int8_rate) << "    # gradient values per second through the int8 codec (one thread)\n";
  if (m.powersgd_rate > 0)
    o << "powersgd_rate = " << num(m.powersgd_rate)
      << "    # gradient values per second through PowerSGD at r = 4 (one thread)\n";
  if (!m.threads.counts.empty()) {
    const auto list = [](const auto& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(double(v[i]));
      return s + "]";
    };
    o << "\n[threads]   # one rank's speed-up over one thread at each count\ncounts = ";
    std::string c = "[";
    for (size_t i = 0; i < m.threads.counts.size(); ++i) c += (i ? ", " : "") + std::to_string(m.threads.counts[i]);
    o << c << "]\ngemm = " << list(m.threads.gemm) << "\n";
    if (!m.threads.bf16_gemm.empty()) o << "bf16_gemm = " << list(m.threads.bf16_gemm) << "\n";
    o << "memory = " << list(m.threads.memory) << "\n";
    if (!m.threads.activation.empty()) o << "activation = " << list(m.threads.activation) << "\n";
  }
  write_link(o, "intra_node", m.intra_node);
  if (m.has_inter_node) write_link(o, "inter_node", m.inter_node);
  return o.str();
}

}  // namespace strata
