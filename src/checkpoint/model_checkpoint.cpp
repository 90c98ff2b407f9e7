#include "checkpoint/model_checkpoint.hpp"
#include "model/model_kind.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"

namespace strata {
namespace {

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const char* kGroups[3] = {"/params/", "/optim/adam_m/", "/optim/adam_v/"};
const std::string kCodecState = "/comm/grad_compression";

// The part of p's AdamW moments this rank keeps (all of its shard, or with ZeRO-1 what of
// it falls in the rank's block), as boxes of the global tensor, and where its values start
// in the moment buffers.
struct MomentPart {
  std::vector<Hyperslab> boxes;
  int64_t at = 0;
};
MomentPart moment_part(const ParamStore<float>& store, const ParamInfo& p) {
  MomentPart out;
  int64_t next = -1;  // the parts' moments follow each other (ZeroState::moment_parts)
  for (const auto& part : store.zero().moment_parts(p)) {
    if (next < 0) out.at = part.at;
    if (next >= 0 && part.at != next)
      throw std::logic_error("moment_part: " + p.name + "'s moments are not contiguous");
    next = part.at + (part.end - part.begin);
    for (auto b : flat_range_hyperslabs(p.count, part.begin - p.offset, part.end - p.offset)) {
      for (size_t d = 0; d < b.start.size(); ++d) b.start[d] += p.start[d];
      out.boxes.push_back(std::move(b));
    }
  }
  return out;
}

}  // namespace

int64_t write_model_checkpoint(const std::string& path, MPI_Comm comm, const ReplicaPlace& place,
                               ParamStore<float>& store, const TrainState& state, const Deck& deck,
                               const std::string& layout, bool pause_midway,
                               const std::function<void(const std::string&)>& on_write_failure) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // Device -> host once: the three buffers (params, m, v; ZeRO-3: the parameters this rank keeps).
  std::vector<typename Tensor1<float>::HostMirror> host;
  for (const V1<const float>& b :
       {store.param_values(), V1<const float>(store.zero().adam_m()), V1<const float>(store.zero().adam_v())}) {
    host.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, "checkpoint_host"), b.extent(0));
    Kokkos::deep_copy(host.back(), b);
  }
  const bool owned_params = store.zero().params_sharded();  // written as the moments are

  CheckpointWriter w(path, comm, on_write_failure);
  // a rank that could not create the file would skip the collective calls the others make
  if (!min_over(comm, w.error().empty() ? 1 : 0))
    throw IoError(w.error().empty() ? "another rank could not create " + path : w.error());
  int64_t bytes = 0;
  const auto& infos = store.infos();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (pause_midway && i == infos.size() / 2) {
      if (rank == 0)
        std::fprintf(stderr, "strata: injected fault: pausing inside the checkpoint write of %s\n", path.c_str());
      std::fflush(stderr);
      ::sleep(600);
    }
    const auto& p = infos[i];
    // The holders of this shard split its rows of dimension 0: holder h writes block h.
    const int64_t data_size = p.expert ? place.expert_size : place.size,
                  data_rank = p.expert ? place.expert_rank : place.rank;
    const int64_t holders = data_size * p.replicas, me = data_rank * p.replicas + p.replica;
    const int64_t rows = p.count[0], row_size = rows > 0 ? p.numel / rows : 0;  // 0 rows: held elsewhere
    const int64_t begin = rows * me / holders, end = rows * (me + 1) / holders;
    std::vector<int64_t> start = p.start, count = p.count;
    start[0] += begin;
    count[0] = end - begin;
    if (!owned_params)
      w.write_tensor(kGroups[0] + p.name, p.shape, start, count, host[0].data() + p.offset + begin * row_size);
    if (!store.zero().moments_sharded()) {
      for (int g = 1; g < 3; ++g)
        w.write_tensor(kGroups[g] + p.name, p.shape, start, count, host[g].data() + p.offset + begin * row_size);
    } else {  // ZeRO-1/2/3: each data rank writes the moments (and ZeRO-3 parameters) it keeps (one tensor replica for
              // all)
      MomentPart part = moment_part(store, p);
      if (p.replica != 0) part.boxes.clear();
      for (int g = owned_params ? 0 : 1; g < 3; ++g)
        w.write_tensor(kGroups[g] + p.name, p.shape, part.boxes, host[g].data() + part.at);
    }
    bytes += 3 * p.global_numel * int64_t(sizeof(float));
  }
  if (!state.tokenizer.empty()) w.write_bytes("/tokenizer/model", state.tokenizer);
  if (!state.codec_place.empty()) {  // every rank alike (the place is the run's)
    const auto longest = int64_t(max_over(comm, double(state.codec_state.size())));
    if (longest > 0)  // (none before the first sum)
      w.write_tensor(kCodecState, {int64_t(size), longest}, {int64_t(rank), 0}, {1, int64_t(state.codec_state.size())},
                     state.codec_state.data());
    w.write_attribute("grad_compression", state.codec_place);
  }
  w.write_attribute("format", std::string(kCheckpointFormat));
  w.write_attribute("step", state.step);
  w.write_attribute("optim_steps", state.optim_steps);
  w.write_attribute("tokens_seen", state.tokens_seen);
  w.write_attribute("seed", int64_t(deck.run.seed));
  w.write_attribute("val_loss", state.val_loss);
  w.write_attribute("deck", deck.resolved_toml);
  w.write_attribute("layout", layout);
  if (!state.init_from.empty()) w.write_attribute("init_from", state.init_from);
  if (!state.engine.empty()) w.write_attribute("engine", state.engine);
  w.write_attribute("ranks", int64_t(size));
  w.write_attribute("sampler", std::string("counter-based: sequence i of step s is a function of (seed, s, i); "
                                           "training resumes at step = the 'step' attribute"));
  w.close();
  if (!w.error().empty()) throw IoError(w.error());
  return bytes;
}

int64_t checkpoint_bytes(const ParamStore<float>& store) {
  int64_t values = 0;
  for (const auto& p : store.infos()) values += p.global_numel;
  return 3 * values * int64_t(sizeof(float));
}

std::string check_checkpoint_file(const std::string& path, const ParamStore<float>& store, int64_t step) {
  try {
    CheckpointReader r(path);
    if (r.string_attribute("format") != kCheckpointFormat)
      return "it is not of format " + std::string(kCheckpointFormat);
    if (step >= 0 && r.int_attribute("step") != step)
      return "its step attribute is " + std::to_string(r.int_attribute("step")) + ", not " + std::to_string(step);
    for (const auto& p : store.infos())
      for (const char* g : kGroups)
        if (!r.has_tensor(g + p.name) || r.shape(g + p.name) != p.shape)
          return "tensor " + std::string(g) + p.name + " is missing or misshapen";
  } catch (const StrataError& e) {
    return e.what();
  }
  return "";
}

std::string read_checkpoint_tokenizer(const std::string& path) {
  CheckpointReader r(path);
  return r.has_tensor("/tokenizer/model") ? r.read_bytes("/tokenizer/model") : std::string();
}

namespace {

// The format attribute, then every tensor of `groups` in store's shapes, before anything is read.
void check_readable(const CheckpointReader& r, const ParamStore<float>& store, int groups) {
  const std::string& path = r.path();
  std::string format;
  try {
    format = r.string_attribute("format");
  } catch (const UserError&) {
    throw UserError("'" + path + "' is not a strata checkpoint (no format attribute)");
  }
  if (format != kCheckpointFormat)
    throw UserError("'" + path + "' has checkpoint format '" + format + "', this strata reads '" + kCheckpointFormat +
                    "'");
  for (const auto& p : store.infos())
    for (int g = 0; g < groups; ++g) {
      const std::string name = kGroups[g] + p.name;
      if (!r.has_tensor(name))
        throw UserError("checkpoint '" + path + "' has no tensor " + name + ": it was written for another model");
      const auto shape = r.shape(name);
      if (shape != p.shape)
        throw UserError("checkpoint '" + path + "': tensor " + name + " has shape " + shape_string(shape) +
                        " but the deck's model needs " + shape_string(p.shape));
    }
}

}  // namespace

std::string read_checkpoint_params(const std::string& path, ParamStore<float>& store, int64_t n_head) {
  CheckpointReader r(path);
  check_readable(r, store, 1);
  const Deck written = parse_model_deck(r.string_attribute("deck"), path + " (its deck)", {}, KeyEffect::Ignore);
  if (is_gpt(written.model) && written.model.n_head != n_head)
    throw UserError("checkpoint '" + path + "' was written with model.n_head = " +
                    std::to_string(written.model.n_head) + ", the deck has " + std::to_string(n_head));
  auto& params = store.zero().params_sharded() ? store.zero().owned_params() : store.params();
  auto host = Kokkos::create_mirror_view(params);
  for (const auto& p : store.infos())
    if (p.numel == 0) {
      continue;
    } else if (store.zero().params_sharded()) {  // ZeRO-3: the part this rank keeps
      const MomentPart part = moment_part(store, p);
      r.read_tensor(kGroups[0] + p.name, part.boxes, host.data() + part.at);
    } else {
      r.read_tensor(kGroups[0] + p.name, p.start, p.count, host.data() + p.offset);
    }
  Kokkos::deep_copy(params, host);
  return "step " + std::to_string(r.int_attribute("step")) + " of a run of layout " + r.string_attribute("layout");
}

std::vector<float> read_codec_state(const std::string& path, int rank) {
  CheckpointReader r(path);
  if (!r.has_tensor(kCodecState)) return {};
  const auto shape = r.shape(kCodecState);
  if (shape.size() != 2 || rank >= shape[0])
    throw UserError("checkpoint '" + path + "': " + kCodecState + " has no row for rank " + std::to_string(rank));
  std::vector<float> row(static_cast<size_t>(shape[1]));
  r.read_tensor(kCodecState, {rank, 0}, {1, shape[1]}, row.data());
  return row;
}

TrainState read_model_checkpoint(const std::string& path, ParamStore<float>& store) {
  CheckpointReader r(path);
  check_readable(r, store, 3);
  // Read into host buffers (checksums verified), then copy to the device in one go.
  const bool owned_params = store.zero().params_sharded();  // ZeRO-3: the parameters are read as the moments
  Tensor1<float>* buffers[3] = {owned_params ? &store.zero().owned_params() : &store.params(), &store.zero().adam_m(),
                                &store.zero().adam_v()};
  std::vector<typename Tensor1<float>::HostMirror> host;
  for (auto* b : buffers) host.push_back(Kokkos::create_mirror_view(*b));
  for (const auto& p : store.infos()) {
    if (p.numel == 0) continue;  // parameters of other pipeline stages are read there
    if (!owned_params) r.read_tensor(kGroups[0] + p.name, p.start, p.count, host[0].data() + p.offset);
    const MomentPart part = moment_part(store, p);  // with ZeRO-1, of this rank's block
    for (int g = owned_params ? 0 : 1; g < 3; ++g)
      r.read_tensor(kGroups[g] + p.name, part.boxes, host[g].data() + part.at);
  }
  TrainState s;
  s.step = r.int_attribute("step");
  s.optim_steps = r.int_attribute("optim_steps");
  s.tokens_seen = r.int_attribute("tokens_seen");
  s.val_loss = r.double_attribute("val_loss");
  s.deck = r.string_attribute("deck");
  if (r.has_attribute("init_from")) s.init_from = r.string_attribute("init_from");
  if (r.has_attribute("engine")) s.engine = r.string_attribute("engine");
  if (r.has_attribute("grad_compression")) s.codec_place = r.string_attribute("grad_compression");
  for (int g = 0; g < 3; ++g) Kokkos::deep_copy(*buffers[g], host[g]);
  return s;
}

}  // namespace strata
