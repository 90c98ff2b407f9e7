#include "plan/layout_search.hpp"

#include <algorithm>
#include <tuple>

#include "core/error.hpp"
#include "model/model_kind.hpp"
#include "plan/axonn_model.hpp"
#include "plan/dry_models.hpp"
#include "plan/step_prediction.hpp"

namespace strata {

namespace {

// The 3D splits of a tensor size the search goes on with: every one (`all`), or the
// kBest3D fastest with the most and with the fewest rows a micro-batch can have (data =
// ranks / size and data = 1, one micro-batch). The split trades transfers that go with the
// rows (the X and Y groups' all-reduces) against transfers that do not (the depth group's
// weight gathers), so the best split moves with the rows; with both ends the search finds
// the full search's best on every GPT deck of inputs/ (tests/plan/test_3d_search.cpp) at
// a third of its cost (strata plan gpt-1.3b on 64 ranks: 23 s, every split 70 s).
std::vector<Layout> kept_3d_splits(const Deck& deck, int ranks, int size, const MachineFile* machine, bool all) {
  constexpr size_t kBest3D = 2;
  std::vector<Layout> kept;
  const auto keep = [&](const std::vector<Layout>& ranked, size_t n) {
    for (size_t i = 0; i < ranked.size() && i < n; ++i) {
      bool seen = false;
      for (const Layout& k : kept)
        seen = seen || (k.tensor_x == ranked[i].tensor_x && k.tensor_y == ranked[i].tensor_y);
      if (!seen) kept.push_back(ranked[i]);
    }
  };
  keep(ranked_3d_splits(deck, ranks, size, machine), all ? size_t(-1) : kBest3D);
  if (!all && ranks > size) keep(ranked_3d_splits(deck, ranks, size, machine, 1), kBest3D);
  return kept;
}

// The serial layout and every tensor split of a size dividing `ranks`: 1D (t >= 2), 2D
// (q x q) and, for the GPT, 3D: of each tensor size those kept_3d_splits keeps (every
// one where the deck asks for 3D at no more than 8 ranks).
std::vector<Layout> tensor_splits(const Deck& deck, int ranks, const MachineFile* machine, const Layout& serial) {
  std::vector<Layout> splits{serial};
  for (int t = 2; t <= ranks; ++t)
    if (ranks % t == 0) {
      Layout l = serial;
      l.split_columns(t, deck.parallel.sequence_parallel);
      splits.push_back(l);
    }
  for (int q = 2; q * q <= ranks; ++q)
    if (ranks % (q * q) == 0) {
      Layout l = serial;
      l.split_grid(q);
      splits.push_back(l);
    }
  const bool all_3d = tensor_split_of(deck.parallel).as<AxonnSplit>() && ranks <= 8;
  for (int size = 2; size <= ranks; ++size) {
    if (ranks % size != 0 || !is_gpt(deck.model)) continue;
    for (const Layout& l : kept_3d_splits(deck, ranks, size, machine, all_3d)) {
      Layout split = serial;
      split.split_axonn(l.tensor_x, l.tensor_y, l.tensor_depth);
      splits.push_back(split);
    }
  }
  return splits;
}

// The tensor splits, each with every context split that fits the ranks and the sequence.
std::vector<Layout> context_bases(const Deck& deck, int ranks, const std::vector<Layout>& splits) {
  std::vector<Layout> bases;
  for (const Layout& split : splits)
    for (int x = 1; x <= ranks / split.tensor_size(); ++x)
      if ((ranks / split.tensor_size()) % x == 0 &&
          (x == 1 || (is_gpt(deck.model) && deck.model.seq_len % (2 * x) == 0))) {
        Layout l = split;
        l.context = x;
        l.context_mode =
            x > 1 ? deck.parallel.context_mode : ContextMode::Ring;  // as the deck asks (acts with a split)
        bases.push_back(l);
      }
  return bases;
}

// The variants of a layout that the deck's and its model kind's rules admit: each expert
// split e dividing data (with mixtures), no 2D split with mixtures.
std::vector<Layout> admitted(const Deck& deck, Layout l) {
  std::vector<Layout> out;
  const int64_t experts = is_gpt(deck.model) ? deck.model.moe_experts : 0;
  if (experts > 0 && !tensor_split_of(l).divisions().refuses_experts.empty()) return out;
  for (int e = 1; e <= l.data; ++e) {
    if (l.data % e != 0 || (e > 1 && experts == 0)) continue;  // (the experts over e x t: check_model_fits_grid)
    l.expert = e;
    const Deck d = with_layout(deck, l);
    if (d.data.batch_size % l.data != 0) return out;
    try {
      check_model_fits_grid(d, "plan");
      check_model_deck(d, "plan");
    } catch (const UserError&) {
      continue;
    }
    out.push_back(l);
  }
  return out;
}

// Adds the admitted variants of a layout.
struct Admit {
  const Deck& deck;
  std::vector<Layout>& out;
  void operator()(const Layout& l) const {
    for (const Layout& v : admitted(deck, l)) out.push_back(v);
  }
};

// The layouts of `l` (p = l.pipeline >= 2 stages): MGRIT's layer ranks where the kind and
// split allow (the deck's levels, and 2 where it has one), and each schedule with each
// micro-batch count m dividing the replica's batch, up to kMaxMicroBatchesPerStage * p.
void add_staged(const Deck& deck, Layout l, const Admit& admit) {
  const int64_t p = l.pipeline;
  const int64_t replica_batch = deck.data.batch_size / l.data;
  if (model_kind_of(deck).layer_parallel && is_gpt(deck.model) && l.context == 1 && !l.sequence_parallel &&
      tensor_split_of(l).traits().whole_activations) {
    Layout lp = l;
    lp.layer_method = LayerMethod::MGRIT;
    lp.micro_batches = 1;
    lp.recompute = Recompute::None;  // (MGRIT keeps the states at its own points: the deck refuses recomputation)
    std::vector<int64_t> levels = {deck.parallel.mgrit_levels};
    if (deck.parallel.mgrit_levels == 1) levels.push_back(2);
    for (const int64_t lv : levels) {
      lp.mgrit_levels = lv;
      admit(lp);  // (the deck's rules: steps for every layer rank, the levels fit them)
    }
  }
  for (const auto& [schedule, name] : schedule_names()) {
    if ((schedule == Schedule::XPipe && (l.recompute == Recompute::Full || l.zero > 0)) ||
        (splits_backward(schedule) && (l.recompute != Recompute::None || l.sequence_parallel)))
      continue;
    const bool interleaved = schedule == Schedule::Interleaved;
    for (int v = interleaved ? 2 : 1; v <= (interleaved ? kMaxVirtualStages : 1); ++v)
      for (int64_t m = 1; m <= std::min<int64_t>(replica_batch, kMaxMicroBatchesPerStage * p); ++m)
        if (replica_batch % m == 0) {
          l.schedule = schedule;
          l.virtual_stages = v;
          l.micro_batches = int(m);
          admit(l);  // interleaved: n_layer >= p v and p | m (check_model_fits_grid)
        }
  }
}

}  // namespace

std::vector<Layout> ranked_3d_splits(const Deck& deck, int ranks, int size, const MachineFile* machine, int data,
                                     DryModels* models) {
  const auto& md = deck.model;
  std::vector<std::tuple<double, double, Layout>> scored;  // (seconds, bytes, split)
  DryModels own;
  if (!models) models = &own;
  for (int tx = 1; tx <= size; ++tx)
    for (int ty = 1; tx * ty <= size; ++ty) {
      if (size % (tx * ty) != 0 || ranks % size != 0) continue;
      Layout l = unsplit_layout(deck);
      l.split_axonn(tx, ty, size / (tx * ty));
      l.data = data > 0 ? data : ranks / size;
      const std::vector<Layout> variants = admitted(deck, l);
      if (variants.empty()) continue;
      double seconds = 0;
      if (machine)
        for (const Layout& v : variants) {
          const double s = predict_step(deck, v, *machine, 0, models).step_s;
          seconds = seconds == 0 ? s : std::min(seconds, s);
        }
      const int64_t rows = deck.data.batch_size / l.data * md.seq_len / l.tensor_depth;
      scored.emplace_back(seconds, axonn_block_traffic(md.n_embd, rows, tx, ty, int(l.tensor_depth), 4).wire_bytes(),
                          l);
    }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<Layout> out;
  for (const auto& t : scored) out.push_back(std::get<2>(t));
  return out;
}

std::vector<Layout> feasible_layouts(const Deck& deck, int ranks, const MachineFile* machine) {
  const Layout serial = unsplit_layout(deck);  // recomputation and ZeRO as the deck asks; the planner may add them
  std::vector<Layout> out;
  const Admit admit{deck, out};
  for (const Layout& base : context_bases(deck, ranks, tensor_splits(deck, ranks, machine, serial))) {
    const int rest = ranks / base.tensor_size() / base.context;
    for (int p = 1; p <= rest; ++p) {
      if (rest % p != 0) continue;
      Layout l = base;
      l.pipeline = p;
      l.data = rest / p;
      if (p == 1)
        admit(l);
      else if (deck.data.batch_size % l.data == 0)
        add_staged(deck, l, admit);
    }
  }
  return out;
}

}  // namespace strata
