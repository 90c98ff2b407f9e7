#pragma once
// The depth group's transfers of the 3D linears (parallel/tp3d_linear.hpp) kept in flight
// under the products, as AxoNN overlaps them (Singh et al., arXiv 2305.13525, section
// "overlapping communication"):
//   - the weight block of the linear that runs next is all-gathered over depth while this
//     linear multiplies (prefetch, then block); a block's four linears run in a known
//     order, forward and input gradient, so the caller names the next one;
//   - each weight gradient's reduce-scatter over depth is left in flight while the next
//     weight gradient is multiplied, and completed when its slot is needed again or at
//     finish();
//   - where a block runs both halves of its backward together (TransformerBlock::backward),
//     each input gradient's all-reduce is left in flight while the same linear's weight
//     gradient is multiplied (input_sums_in_flight), and completed by input_sum().
// Two slots of gathered blocks and two of weight-gradient blocks (the largest block each).
// MPI moves a non-blocking collective only inside MPI calls: the products here are cut
// into pieces along their inner dimension, in whole slices of the 256 values gemm itself
// adds up at a time (so the bits do not change), with progress() on the transfers in
// flight between the pieces. Overlap off (parallel.tensor_overlap =
// false, or Linear3DGroups::overlap) gathers at use and completes each reduce-scatter at
// once: the same values, the blocking schedule.
// In GPU builds the transfers are MPI's, staged through host mirrors (as SUMMA's).
#include <Kokkos_Core.hpp>

#include "comm/comm.hpp"
#include "core/tensor.hpp"
#include "kernels/products.hpp"

namespace strata {

// A 3D linear's three groups (tp3d_linear.hpp): the ranks its input and output columns
// are split over, and its depth group.
struct Linear3DGroups {
  Comm& in;
  Comm& out;
  Comm& depth;
  bool overlap = true;  // the depth group's transfers in flight under the products (tp3d_transfers.hpp)
};

template <class T>
class Linear3DTransfers {
 public:
  // The four slots (two gathered blocks, two gradient blocks), each the largest block's
  // values; the caller owns them (its workspace) and attaches them again when they change.
  void attach(V1<T> gathered0, V1<T> gathered1, V1<T> grad0, V1<T> grad1);
  // Posts the gather over g.depth of the block `shard` is this rank's part of, for the
  // linear that runs next (overlap on; nothing when off or depth is 1).
  void prefetch(const Linear3DGroups& g, V1<const T> shard);
  // The (rows x cols) block `shard` is this rank's part of: the prefetched gather, waited
  // for, or gathered now; the shard itself where depth is 1. Valid until the next
  // prefetch or block call.
  V2<const T> block(const Linear3DGroups& g, V1<const T> shard, int64_t rows, int64_t cols);
  // c = op(a) op(b), by slices of its inner dimension, moving the transfers in flight
  // along between pieces. With a
  // timeline on g.depth (Comm::set_trace), an event `label` of category "product".
  void product(const Linear3DGroups& g, const char* label, kernels::ProductPrecision precision, const char* ta,
               const char* tb, V2<const T> a, V2<const T> b, V2<T> c);
  // A slot for a weight gradient's (rows x cols) block; its earlier reduce-scatter, if one
  // is in flight, is completed first.
  V2<T> gradient_slot(int64_t rows, int64_t cols);
  // Adds this rank's shard of the sum over g.depth of the block last given by
  // gradient_slot to dw_shard: in flight (overlap on) until the slot is needed again or
  // finish(), else at once.
  void reduce_scatter(const Linear3DGroups& g, V1<T> dw_shard);
  // While on (and overlap is), linear3d_backward_input leaves its input gradient's sum in
  // flight (sum_later); input_sum() completes it.
  void input_sums_in_flight(bool on) { input_sums_later_ = on; }
  bool input_sums_later(const Linear3DGroups& g) const;
  // Posts the in-place sum of dx over group (the input gradient of the linear that ran).
  void sum_later(Comm& group, V2<T> dx);
  void input_sum();
  // Every transfer in flight completed (a gathered block nobody used is dropped).
  void finish();
  // MPI_Test on every transfer in flight.
  void progress();

 private:
  struct Gather {
    V1<T> values;
    typename V1<T>::HostMirror host;
    const T* shard = nullptr;  // whose block is (being) gathered here; nullptr: free
    Comm* depth = nullptr;
    Comm::Request request;
    bool used = true;   // block() has handed it out (or it was never filled)
    int64_t stamp = 0;  // when it was last posted or handed out
  };
  struct Reduce {
    V1<T> values;
    typename V1<T>::HostMirror host;
    V1<T> target;  // the shard the sum goes to, while in flight
    Comm* depth = nullptr;
    Comm::Request request;
  };
  void pieces(kernels::ProductPrecision precision, const char* ta, const char* tb, V2<const T> a, V2<const T> b,
              V2<T> c);
  Gather& free_gather();
  void post_gather(Gather& s, const Linear3DGroups& g, V1<const T> shard);
  void complete(Gather& s);
  void complete(Reduce& s);
  Gather gathers_[2];
  Reduce reduces_[2];
  struct Sum {
    V2<T> values;
    typename V2<T>::HostMirror host;
    Comm* group = nullptr;
    Comm::Request request;
  } sum_;
  bool input_sums_later_ = false;
  int next_reduce_ = 0;
  int64_t clock_ = 0;
};

}  // namespace strata
