// The planner's 3D search (plan/layout.hpp: ranked_3d_splits, feasible_layouts): a tensor
// size's splits are those the widths allow, fastest first by the step prediction; and the
// pruned search, which keeps two splits of each size, is as good as the full one on every
// GPT deck of inputs/.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "core/error.hpp"
#include "model/model_kind.hpp"
#include "plan/dry_models.hpp"
#include "plan/layout.hpp"
#include "plan/layout_search.hpp"
#include "plan/machine_file.hpp"
#include "plan/step_prediction.hpp"
#include "support/source_file.hpp"

using namespace strata;
using strata::test::source_file;

namespace {
// What the run's own checks say of a layout (the planner's admission)
bool admits(const Deck& deck, const Layout& l) {
  try {
    const Deck d = with_layout(deck, l);
    check_model_fits_grid(d, "test");
    check_model_deck(d, "test");
    return d.data.batch_size % l.data == 0;
  } catch (const UserError&) {
    return false;
  }
}
// Every key a layout sets (its name leaves out some: the expert split, ZeRO)
std::string key(const Layout& l) {
  std::string k;
  for (const auto& o : layout_overrides(l)) k += o.substr(o.find('.') + 1) + " ";
  return k;
}
}  // namespace

TEST_CASE("3D search: a tensor size's splits are those the widths allow, fastest first", "[plan][axonn]") {
  const Deck deck = load_model_deck(source_file("inputs/gpt-1.3b.toml"));
  const MachineFile m = read_machine_file(source_file("machines/h100-dgx-cluster.toml"));
  for (const int size : {2, 4, 8, 16, 64}) {
    const auto ranked = ranked_3d_splits(deck, 64, size, &m);
    INFO("size " << size);
    REQUIRE(!ranked.empty());
    double last = 0;
    for (const Layout& l : ranked) {
      CHECK(l.tensor_x * l.tensor_y * l.tensor_depth == size);
      CHECK(l.data * size == 64);
      CHECK(deck.model.n_embd % (l.tensor_x * l.tensor_depth) == 0);
      CHECK(deck.model.n_head % l.tensor_y == 0);
      const double s = predict_step(deck, l, m).step_s;
      CHECK(s >= last);  // sorted
      last = s;
    }
  }
  // the overlap: switched off, the depth group's transfers add to the step
  Deck off = deck;
  off.parallel.tensor_overlap = false;
  Layout l;
  l.tensor_mode = TensorMode::ThreeD, l.tensor_x = 2, l.tensor_y = 2, l.tensor_depth = 2, l.data = 8;
  const auto on_p = predict_step(deck, l, m), off_p = predict_step(off, l, m);
  CHECK(on_p.comm_s < off_p.comm_s);
  CHECK(on_p.wire_bytes == off_p.wire_bytes);
}

// Every GPT deck of inputs/ as strata plan --ranks reads it, on each machine file at 8
// ranks and on the H100 cluster's also at 16 (two nodes): the fastest 3D layout of the planner's pruned search
// (feasible_layouts: of each tensor size the two splits ranked_3d_splits puts first, at data x split alone) is as fast
// as the fastest of the full search, which gives every one of those layouts (pipelines, schedules, context, experts)
// every other split of its size.
TEST_CASE("3D search: the pruned search loses no layout the full prediction ranks first", "[plan][axonn]") {
  int decks = 0, weighed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_file("inputs"))) {
    const Deck deck = load_model_deck(entry.path().string(),
                                      {"parallel.data=1", "parallel.pipeline=1", "parallel.tensor_rows=1",
                                       "parallel.tensor_cols=1", "parallel.micro_batches=1", "parallel.expert=1"},
                                      KeyEffect::Ignore);
    if (!is_gpt(deck.model)) continue;
    ++decks;
    for (const char* machine : {"machines/h100-dgx-cluster.toml", "machines/debian-2core-vm.toml"}) {
      const MachineFile m = read_machine_file(source_file(machine));
      DryModels models;
      for (const int ranks : {8, 16}) {
        if (ranks == 16 && m.ranks_per_node < 8) continue;  // 16: on the cluster (two of its nodes)
        double pruned_s = 0, full_s = 0;
        std::string pruned, full;
        std::set<std::string> seen;
        for (const Layout& l : feasible_layouts(deck, ranks, &m)) {
          if (l.tensor_split() != TensorMode::ThreeD) continue;
          const double s = predict_step(deck, l, m, 0, &models).step_s;
          if (pruned_s == 0 || s < pruned_s) pruned_s = s, pruned = key(l);
          for (const Layout& split : ranked_3d_splits(deck, ranks, l.tensor_size(), &m, 0, &models)) {
            Layout v = l;
            v.tensor_x = split.tensor_x, v.tensor_y = split.tensor_y, v.tensor_depth = split.tensor_depth;
            if (!seen.insert(key(v)).second || !admits(deck, v)) continue;
            ++weighed;
            const double sv = predict_step(deck, v, m, 0, &models).step_s;
            if (full_s == 0 || sv < full_s) full_s = sv, full = key(v);
          }
        }
        INFO(entry.path().filename().string()
             << " on " << machine << ", " << ranks << " ranks: pruned best " << pruned << ", full best " << full);
        CHECK(pruned_s <= full_s * (1 + 1e-12));
      }
    }
  }
  INFO(decks << " GPT decks, " << weighed << " layouts of the full search");
  CHECK(decks >= 10);
  CHECK(weighed >= 1000);
}
