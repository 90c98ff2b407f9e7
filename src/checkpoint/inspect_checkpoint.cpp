#include "checkpoint/inspect_checkpoint.hpp"

#include <cmath>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "core/error.hpp"

namespace strata {

int inspect_checkpoint(const std::string& path, std::ostream& out) {
  CheckpointReader r(path);
  out << "checkpoint   " << path << "\n";
  out << "format       " << r.string_attribute("format") << "\n";
  out << "step         " << r.int_attribute("step") << " (AdamW updates " << r.int_attribute("optim_steps")
      << ", tokens seen " << r.int_attribute("tokens_seen") << ")\n";
  const double val = r.double_attribute("val_loss");
  out << "val loss     " << (std::isnan(val) ? std::string("-") : std::to_string(val)) << "\n";
  out << "written by   " << r.int_attribute("ranks") << " ranks, layout " << r.string_attribute("layout") << "\n";
  out << "sampler      " << r.string_attribute("sampler") << "\n";
  if (r.has_attribute("init_from")) out << "init_from    " << r.string_attribute("init_from") << "\n";
  if (r.has_attribute("grad_compression")) out << "compression  " << r.string_attribute("grad_compression") << "\n";
  out << "deck:\n";
  const std::string deck = r.string_attribute("deck");
  for (size_t start = 0; start < deck.size();) {
    const size_t end = deck.find('\n', start);
    out << "  " << deck.substr(start, end - start) << "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  int failures = 0;
  int64_t values = 0;
  // mixture layers: each expert's weight norms (the slices of the experts' [E, ...] tensors)
  std::vector<std::pair<std::string, std::vector<double>>> expert_norms;
  out << "tensors (checksums verified by reading every chunk):\n";
  for (const std::string group : {"/params", "/optim/adam_m", "/optim/adam_v", "/comm"}) {
    for (const auto& name : r.tensor_names(group)) {
      const std::string full = group + "/" + name;
      const auto shape = r.shape(full);
      int64_t n = 1;
      std::string shape_text = "[";
      for (size_t i = 0; i < shape.size(); ++i) {
        n *= shape[i];
        shape_text += (i ? ", " : "") + std::to_string(shape[i]);
      }
      shape_text += "]";
      std::vector<float> data(static_cast<size_t>(n));
      std::string status = "ok";
      try {
        r.read_tensor(full, data.data());
      } catch (const UserError&) {
        status = "CHECKSUM FAILED";
        ++failures;
      }
      values += n;
      out << "  " << full << "  " << shape_text << "  " << status << "\n";
      const bool expert_weight =
          group == std::string("/params") && shape.size() == 3 &&
          (name.size() > 14 && (name.compare(name.size() - 14, 14, ".moe.fc.weight") == 0 ||
                                (name.size() > 16 && name.compare(name.size() - 16, 16, ".moe.proj.weight") == 0)));
      if (expert_weight) {
        std::vector<double> norms(size_t(shape[0]), 0.0);
        const int64_t slot = n / shape[0];
        for (int64_t i = 0; i < n; ++i) norms[size_t(i / slot)] += double(data[size_t(i)]) * double(data[size_t(i)]);
        for (auto& v : norms) v = std::sqrt(v);
        expert_norms.emplace_back(name, norms);
      }
    }
  }
  if (r.has_tensor("/tokenizer/model")) {
    std::string status = "ok";
    int64_t bytes = 0;
    try {
      bytes = int64_t(r.read_bytes("/tokenizer/model").size());
    } catch (const UserError&) {
      status = "CHECKSUM FAILED";
      ++failures;
    }
    out << "  /tokenizer/model  SentencePiece model, " << (bytes ? std::to_string(bytes) + " bytes  " : "") << status
        << "\n";
  }
  if (!expert_norms.empty()) {
    out << "experts (each expert's weight norm, by tensor; the expert is the leading dimension):\n";
    for (const auto& [name, norms] : expert_norms) {
      out << "  " << name << " (" << norms.size() << " experts):";
      for (size_t i = 0; i < norms.size(); ++i) out << " " << i << ": " << std::to_string(norms[i]).substr(0, 6);
      out << "\n";
    }
  }
  out << values << " values, " << (failures ? std::to_string(failures) + " tensors FAILED" : "all checksums ok")
      << "\n";
  return failures;
}

}  // namespace strata
