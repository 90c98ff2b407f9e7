#pragma once
// Token + position embedding: x0 = wte[tokens] + wpe[positions]. wte is [vocab, C] and is
// tied to the LM head; wpe is [seq_len, C]. Under a tensor split wte is cut by vocabulary
// (and by hidden block in 2D): parallel/vocab_parallel.hpp. Under a context split the local
// rows sit at their chunks' positions (parallel/context_parallel.hpp): the block gathers
// those rows of wpe for the forward and adds their gradient back to them.
#include "comm/traffic.hpp"
#include "model/block_context.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/stage_placement.hpp"
#include "parallel/tensor_parallel.hpp"
#include "state/param_store.hpp"
#include "state/unit_hooks.hpp"

namespace strata {

template <class T>
struct EmbeddingCache {
  Tensor2<T> out;        // (BT, C') this rank's rows and hidden block
  Tensor2<T> scratch;    // 2D: (all B*T of the replica, C/q)
  Tensor2<T> positions;  // context split: (T/X, C') the local rows' wpe, then their gradient
  V1<const int32_t> tokens;
  void ensure(int64_t rows, int64_t c) {
    if (int64_t(out.extent(0)) != rows) out = Tensor2<T>("emb.out", rows, c);
  }
  int64_t bytes() const { return view_bytes(out, scratch, positions); }
  // bytes() after a forward of `rows` local rows (scratch_rows: the 2D scratch's, else 0;
  // position_rows: a context split's local sequence, else 0)
  static int64_t bytes_for(int64_t rows, int64_t c, int64_t scratch_rows, int64_t position_rows) {
    return (rows + scratch_rows + position_rows) * c * int64_t(sizeof(T));
  }
};

template <class T>
class EmbeddingBlock {
 public:
  // The first pipeline stage holds wte and wpe and runs the block; the last holds a copy
  // of wte for the tied LM head. wte has `rows` rows: the vocabulary and its padding
  // (model.padded_vocab_size), which starts at zero.
  EmbeddingBlock(ParamStore<T>& store, const TensorParallel& tp, const ContextParallel& cp,
                 const StagePlacement& placement, int64_t vocab, int64_t rows, int64_t seq_len, int64_t c, double std);
  // tokens: all B*T tokens of the replica (a context split's local rows of them: T/X per
  // sequence); local: the rows this rank computes (2D: its batch block) -> cache.out
  // (local.rows(), C').
  // units (ZeRO-2/3's finer units; no 2D or 3D split, no sequence parallelism): wte read
  // chunk by chunk of vocabulary rows, then wpe (units 0 .. chunks - 1, then chunks).
  void forward(const BlockContext& local, V1<const int32_t> tokens, EmbeddingCache<T>& cache,
               const UnitHooks* units = nullptr) const;
  // dout (local.rows(), C'): accumulates dwte, dwpe (units: each chunk's, then wpe's, each
  // told final as it is made).
  void backward(const BlockContext& local, V2<const T> dout, EmbeddingCache<T>& cache,
                const UnitHooks* units = nullptr) const;
  // What one forward and backward on local sends (comm/traffic.hpp).
  void traffic(const BlockContext& local, Traffic& out) const;
  int wte_index() const { return wte_; }

 private:
  V2<const T> positions(const BlockContext& local, EmbeddingCache<T>& cache) const;  // wpe's rows of the local rows
  void forward_chunks(const BlockContext& local, V1<const int32_t> tokens, EmbeddingCache<T>& cache,
                      const UnitHooks& units) const;
  void backward_chunks(const BlockContext& local, V2<const T> dout, EmbeddingCache<T>& cache,
                       const UnitHooks& units) const;
  ParamStore<T>& store_;
  const TensorParallel& tp_;
  const ContextParallel& cp_;
  int wte_, wpe_;
};

}  // namespace strata
