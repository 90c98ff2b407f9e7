// Models in and out (docs/interop.md): a checkpoint exported as Hugging Face safetensors
// and as an llm.c file, then read back by model.init_from on every layout of this rank
// count (data with ZeRO-1, 1D and 2D tensor splits, pipeline stages), gives the
// checkpoint's parameters bit for bit (the bf16 exports: their rounding), as does the
// checkpoint itself; the padding of a padded vocabulary is zero whatever the file holds.
// An llm.c file built here byte by byte from the format's definition (not by strata's
// writer: its own Vp, values that say where they lie) reads to the values the definition
// puts in each of strata's tensors.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/initial_weights.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "cli/export_model.hpp"
#include "io/stored_tensor.hpp"
#include "model/make_model.hpp"
#include "support/gather_params.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

const std::string kDir = "interop_test_files";
constexpr int64_t kVocab = 256, kRows = 320, kHandVp = 384;

Deck interop_deck(const std::vector<std::string>& layout) {
  std::vector<std::string> all = {"model.padded_vocab_size=" + std::to_string(kRows)};
  all.insert(all.end(), layout.begin(), layout.end());
  return small_gpt_deck(all);
}

// llm.c's tensor t (in the file's order), element e: a value that says where it lies.
float hand_value(int t, int64_t e) { return float(t + 1) * 1e-2f + float(e % 997) * 1e-5f; }

// An llm.c model file (train_gpt2.c's layout) written from the format's definition.
void write_hand_built_llmc(const std::string& path, const ModelConfig& m) {
  const int64_t L = m.n_layer, C = m.n_embd;
  const int64_t sizes[16] = {kHandVp * C,   m.seq_len * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                             L * C * C,     L * C,         L * C, L * C, L * 4 * C * C, L * 4 * C,
                             L * C * 4 * C, L * C,         C,     C};
  int32_t header[256] = {};
  header[0] = 20240326, header[1] = 3, header[2] = int32_t(m.seq_len), header[3] = int32_t(kVocab);
  header[4] = int32_t(L), header[5] = int32_t(m.n_head), header[6] = int32_t(C), header[7] = int32_t(kHandVp);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fwrite(header, 4, 256, f);
  for (int t = 0; t < 16; ++t)
    for (int64_t e = 0; e < sizes[t]; ++e) {
      // wte's padding rows hold garbage the reader must not take
      const float v = t == 0 && e >= kVocab * C ? 7.0f : hand_value(t, e);
      std::fwrite(&v, 4, 1, f);
    }
  REQUIRE(std::fclose(f) == 0);
}

// What strata's tensors hold after reading that file: the definition's [out, in] layout
// and stacking, written out for each tensor, in the serial store's global order.
std::vector<double> hand_expected(const ParamStore<float>& serial, const ModelConfig& m) {
  const int64_t C = m.n_embd;
  std::vector<double> out;
  for (const auto& p : serial.infos()) {
    const std::string& n = p.name;
    const auto block = [&](const char* rest) { return n.size() > 7 && n.substr(n.find('.', 7) + 1) == rest; };
    const int64_t l = n.rfind("blocks.", 0) == 0 ? std::stoll(n.substr(7)) : 0;
    for (int64_t g = 0; g < p.global_numel; ++g) {
      double v = 0;
      if (n == "wte")
        v = g / C < kVocab ? hand_value(0, g) : 0.0;
      else if (n == "wpe")
        v = hand_value(1, g);
      else if (n == "lnf.weight")
        v = hand_value(14, g);
      else if (n == "lnf.bias")
        v = hand_value(15, g);
      else if (block("ln1.weight"))
        v = hand_value(2, l * C + g);
      else if (block("ln1.bias"))
        v = hand_value(3, l * C + g);
      else if (block("attn.qkv.weight"))
        v = hand_value(4, l * 3 * C * C + (g % (3 * C)) * C + g / (3 * C));
      else if (block("attn.qkv.bias"))
        v = hand_value(5, l * 3 * C + g);
      else if (block("attn.proj.weight"))
        v = hand_value(6, l * C * C + (g % C) * C + g / C);
      else if (block("attn.proj.bias"))
        v = hand_value(7, l * C + g);
      else if (block("ln2.weight"))
        v = hand_value(8, l * C + g);
      else if (block("ln2.bias"))
        v = hand_value(9, l * C + g);
      else if (block("mlp.fc.weight"))
        v = hand_value(10, l * 4 * C * C + (g % (4 * C)) * C + g / (4 * C));
      else if (block("mlp.fc.bias"))
        v = hand_value(11, l * 4 * C + g);
      else if (block("mlp.proj.weight"))
        v = hand_value(12, l * C * 4 * C + (g % C) * 4 * C + g / C);
      else if (block("mlp.proj.bias"))
        v = hand_value(13, l * C + g);
      else
        FAIL("no llm.c place for " << n);
      out.push_back(double(float(v)));
    }
  }
  return out;
}

std::vector<double> bf16_of(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_float(float_to_bf16(float(v[i])));
  return out;
}

}  // namespace

TEST_CASE("exports read back by init_from give the checkpoint's parameters on every layout", "[mpi][interop]") {
  const int n = world_size();
  const Deck serial_deck = interop_deck({});
  std::vector<double> reference, hand;
  if (world_rank() == 0) {
    std::filesystem::remove_all(kDir);
    std::filesystem::create_directories(kDir);
    auto model = make_model(serial_deck);
    auto& store = model->params();
    {  // values unlike the initial ones everywhere but the padding, which exports drop
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.params());
      for (const auto& p : store.infos())
        for (int64_t i = 0; i < p.numel; ++i)
          if (!(p.name == "wte" && i >= kVocab * p.shape[1]))
            host(p.offset + i) += float(0.05 * std::sin(0.37 * double(p.offset + i) + 1.0));
      Kokkos::deep_copy(store.params(), host);
    }
    write_model_checkpoint(kDir + "/ref.h5", MPI_COMM_SELF, {}, store, TrainState{}, serial_deck, "serial");
    for (const auto& [format, dtype, out] :
         {std::tuple{"hf", "fp32", "/hf"}, std::tuple{"hf", "bf16", "/hf-bf16"}, std::tuple{"llmc", "fp32", "/m.bin"},
          std::tuple{"llmc", "bf16", "/mb.bin"}})
      export_model(kDir + "/ref.h5", ExportOptions{format, kDir + out, dtype});
    write_hand_built_llmc(kDir + "/hand.bin", serial_deck.model);
    reference = gather_global(store, store.params(), MPI_COMM_SELF);
    hand = hand_expected(store, serial_deck.model);
    for (int64_t i = 0; i < (kRows - kVocab) * serial_deck.model.n_embd; ++i)
      REQUIRE(reference[size_t(kVocab * serial_deck.model.n_embd + i)] == 0.0);
  }
  int64_t size = int64_t(reference.size());
  MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  reference.resize(size_t(size));
  hand.resize(size_t(size));
  MPI_Bcast(reference.data(), int(size), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Bcast(hand.data(), int(size), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  auto reference_bf16 = bf16_of(reference);

  std::vector<std::vector<std::string>> layouts;
  if (n == 1) layouts = {{}};
  if (n == 2)
    layouts = {{"parallel.data=2", "parallel.zero=1"},
               {"parallel.tensor_cols=2"},
               {"parallel.pipeline=2"},
               {"parallel.tensor_mode=3d", "parallel.tensor_depth=2"}};
  if (n == 4)
    layouts = {{"parallel.tensor_mode=2d", "parallel.tensor_rows=2", "parallel.tensor_cols=2"},
               {"parallel.tensor_mode=3d", "parallel.tensor_x=2", "parallel.tensor_y=2"},
               {"parallel.tensor_mode=3d", "parallel.tensor_y=2", "parallel.tensor_depth=2"},
               {"parallel.tensor_cols=2", "parallel.pipeline=2"},
               {"parallel.data=2", "parallel.pipeline=2", "parallel.zero=1"}};
  for (const auto& layout : layouts) {
    const Deck deck = interop_deck(layout);
    Training job(deck, MPI_COMM_WORLD, quiet());
    for (const auto& [source, want] :
         {std::pair{"/hf", &reference}, std::pair{"/hf/model.safetensors", &reference}, std::pair{"/m.bin", &reference},
          std::pair{"/ref.h5", &reference}, std::pair{"/hf-bf16", &reference_bf16},
          std::pair{"/mb.bin", &reference_bf16}, std::pair{"/hand.bin", &hand}}) {
      INFO("layout " << describe(layout) << ", init_from " << source);
      const std::string what = load_initial_weights(kDir + source, deck.model, job.params());
      const auto got = global_params_of(job);
      REQUIRE(got.size() == want->size());
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += got[i] != (*want)[i] ? 1 : 0;
      INFO(what);
      REQUIRE(differ == 0);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(kDir);
}
