// Comm's vector sums node by node (Comm::sum_by_node, parallel.grad_sum = "nodes"): of the
// buffer's n values, the first L floor(n / L) (L ranks a node) in L blocks, each rank's
// block summed over its node (reduce-scatter), then over the nodes (all-reduce of that
// block: 1/L of the buffer per rank crosses the network, where one all-reduce over every
// replica sends the whole of it), then every block to the node's ranks (all-gather); the
// last n mod L values summed over the node and then across. An element's sum is its node
// sums, each over the node's ranks, added over the nodes in the across all-reduce's order,
// the same on every rank. With a codec (parallel.grad_compression) the float
// blocks cross coded (comm/across_codec.hpp); the tail goes as it is.
#include "comm/comm.hpp"

#include <type_traits>

#include "comm/across_codec.hpp"

namespace strata {

template <class T>
void Comm::sum_node_by_node(V1<T> buf) {
  const int64_t n = buf.extent(0), l = node_->size(), block = n / l, whole = block * l;
  if (size_ == 1 || n == 0) return;
  if (block > 0) {
    const V1<T> blocks(buf.data(), whole);
    node_->reduce_scatter_blocks(blocks);
    const V1<T> mine(buf.data() + node_->rank() * block, block);
    if constexpr (std::is_same_v<T, float>) {
      if (codec_)
        codec_->sum(*across_, mine);
      else
        across_->allreduce_sum(mine);
    } else {
      across_->allreduce_sum(mine);
    }
    node_->allgather_blocks(blocks);
  }
  if (whole < n) {
    const V1<T> tail(buf.data() + whole, n - whole);
    node_->allreduce_sum(tail);
    across_->allreduce_sum(tail);
  }
}

template void Comm::sum_node_by_node(V1<float>);
template void Comm::sum_node_by_node(V1<double>);

}  // namespace strata
