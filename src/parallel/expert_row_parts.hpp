#pragma once
// A mixture-of-experts layer's rows shared over the tensor ranks (SplitTraits::experts):
// under a split that replicates the rows (1D without sequence parallelism) or holds a
// plane of them (3D), each tensor rank routes one part of the rows, whose outputs (and
// input gradients) are then gathered from every part. Where the residual stream's columns
// are split (3D: over X) the rows are first joined whole, and each rank keeps its column
// block of the gathered outputs.
#include "comm/traffic.hpp"
#include "parallel/tensor_parallel.hpp"

namespace strata {

template <class T>
class ExpertRowParts {
 public:
  // tp must outlive this; width: a whole row's values (C)
  ExpertRowParts(const TensorParallel& tp, int64_t width);
  // whether the rows are shared out (else this rank routes all it holds)
  bool shared() const { return parts_ > 1 && tp_.row_split() == 1; }
  int parts() const { return parts_; }
  int part() const { return part_; }
  bool joins_columns() const { return columns_ > 1; }
  // x (N, C / columns) joined into whole rows (N, C), kept here until the next call; or x
  // itself where the columns are not split
  V2<const T> whole_rows(V2<const T> x) const;
  // every part's rows (N / parts, C) into out (N, C / columns), this rank's column block
  void gather(V2<const T> mine, V2<T> out) const;
  // what whole_rows and gather send for `rows` rows (N)
  void traffic(Traffic& out, int64_t rows, int64_t e) const;

 private:
  // every part's rows into all (N, C), in part order
  void gather_parts(V2<const T> mine, V2<T> all) const;

  const TensorParallel& tp_;
  int parts_, part_, columns_;
  int64_t c_;
  mutable Tensor2<T> wide_, blocks_;  // whole rows (N, C), and an all-gather's blocks
};

}  // namespace strata
