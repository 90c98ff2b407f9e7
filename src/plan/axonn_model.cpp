#include "plan/axonn_model.hpp"

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

}  // namespace strata
