#include "plan/axonn_model.hpp"

#include <algorithm>
#include <tuple>

#include "plan/links.hpp"

namespace strata {

Traffic axonn_block_traffic(int64_t c, int64_t rows, int tx, int ty, int tz, int64_t e) {
  Traffic t;
  struct Linear {
    int64_t k, n;
    bool in_over_x;  // qkv, fc; else proj, fc_proj
  };
  for (const Linear& w :
       {Linear{c, 3 * c, true}, Linear{c, c, false}, Linear{c, 4 * c, true}, Linear{4 * c, c, false}}) {
    const int in = w.in_over_x ? tx : ty, out = w.in_over_x ? ty : tx;
    const char* in_group = w.in_over_x ? "tensor_x" : "tensor_y";
    const char* out_group = w.in_over_x ? "tensor_y" : "tensor_x";
    const int64_t shard = w.k * w.n / (int64_t(in) * out * tz) * e;
    if (tz > 1) {
      t.add("tensor_depth", "allgather", Collective::AllGather, tz, shard, 2);  // forward, and again backward
      t.add("tensor_depth", "reduce_scatter", Collective::ReduceScatter, tz, shard);
      t.add("tensor_depth", "allreduce", Collective::AllReduce, tz, w.n / out * e);  // the bias' gradient
    }
    if (in > 1) t.add(in_group, "allreduce", Collective::AllReduce, in, rows * (w.n / out) * e);
    if (out > 1) t.add(out_group, "allreduce", Collective::AllReduce, out, rows * (w.k / in) * e);
  }
  return t;
}

Axonn3DCost axonn_step_cost(const Deck& deck, const Layout& l, const MachineFile& m) {
  const auto& md = deck.model;
  const Links links(l, m);
  const int64_t e = sizeof(float);  // the planner plans GPT<float>; bf16 products still move fp32
  const int64_t micro_rows = deck.data.batch_size / l.data / l.micro_batches * md.seq_len / l.context / l.tz;
  const int64_t layers = md.n_layer / l.pipeline;
  const int64_t micro = l.micro_batches;
  Traffic block = axonn_block_traffic(md.n_embd, micro_rows, l.tx, l.ty, l.tz, e);
  Traffic step;
  step.add(block, layers * micro);
  const auto depth = [](const std::string& g, const std::string& k) {
    return g == "tensor_depth" && (k == "allgather" || k == "reduce_scatter");
  };
  const auto rest = [&](const std::string& g, const std::string& k) { return !depth(g, k); };
  Axonn3DCost cost;
  cost.wire_bytes = step.wire_bytes();
  const double hidden_able = links.seconds(step, depth), blocking = links.seconds(step, rest);
  cost.seconds = hidden_able + blocking;
  // the linears' products on this rank: forward and backward, 3 x 2 x 12 C^2 per row
  const double c = double(md.n_embd);
  const double products =
      72.0 * c * c * double(micro_rows) * double(layers * micro) / double(l.tx * l.ty) / m.gemm_rate(md.precision);
  // each pass's first gather (and the last reduce-scatter) has no product before it: a
  // quarter of the depth group's transfers stays exposed, the rest hides under the products
  cost.exposed =
      blocking +
      (deck.parallel.tensor_overlap ? hidden_able / 4 + std::max(0.0, 0.75 * hidden_able - products) : hidden_able);
  return cost;
}

std::vector<Layout> best_3d_splits(const Deck& deck, int ranks, int size, int keep, const MachineFile* m) {
  const auto& md = deck.model;
  std::vector<std::tuple<double, double, Layout>> scored;
  for (int tx = 1; tx <= size; ++tx)
    for (int ty = 1; tx * ty <= size; ++ty) {
      if (size % (tx * ty) != 0) continue;
      const int tz = size / (tx * ty);
      const int64_t c = md.n_embd;
      if (c % (int64_t(tx) * tz) != 0 || c % (int64_t(ty) * tz) != 0 || md.n_head % ty != 0 ||
          md.vocab_size % ty != 0 || (deck.data.batch_size / (ranks / size)) % tz != 0)
        continue;
      Layout l;
      l.tensor = TensorMode::ThreeD;
      l.tx = tx, l.ty = ty, l.tz = tz;
      l.data = ranks / size;
      l.recompute = deck.parallel.recompute;
      l.zero = int(deck.parallel.zero);
      if (deck.data.batch_size % l.data != 0) continue;
      const Axonn3DCost cost = m ? axonn_step_cost(deck, l, *m) : Axonn3DCost{};
      const double bytes =
          m ? cost.wire_bytes
            : axonn_block_traffic(c, deck.data.batch_size / l.data * md.seq_len / tz, tx, ty, tz, 4).wire_bytes();
      scored.emplace_back(m ? cost.exposed : bytes, bytes, l);
    }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<Layout> out;
  for (size_t i = 0; i < scored.size() && int(i) < keep; ++i) out.push_back(std::get<2>(scored[i]));
  return out;
}

}  // namespace strata
