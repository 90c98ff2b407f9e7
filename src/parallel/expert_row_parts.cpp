#include "parallel/expert_row_parts.hpp"

#include <stdexcept>

#include "kernels/column_blocks.hpp"
#include "parallel/row_buffers.hpp"

namespace strata {

template <class T>
ExpertRowParts<T>::ExpertRowParts(const TensorParallel& tp, int64_t width)
    : tp_(tp), parts_(tp.traits().experts.parts), part_(tp.traits().experts.part),
      columns_(tp.traits().experts.columns), c_(width) {}

template <class T>
V2<const T> ExpertRowParts<T>::whole_rows(V2<const T> x) const {
  if (columns_ == 1) return x;
  const int64_t n = x.extent(0);
  ensure_row_capacity(blocks_, "moe.blocks", n, c_);
  ensure_row_capacity(wide_, "moe.wide", n, c_);
  const V2<T> blocks = leading_rows(blocks_, n), whole = leading_rows(wide_, n);
  tp_.expert_column_group().comm->allgather<T>(V1<const T>(x.data(), x.size()), values_of(blocks));
  kernels::join_column_blocks<T>(whole, V1<const T>(blocks.data(), blocks.size()), int64_t(x.extent(1)));
  return whole;
}

template <class T>
void ExpertRowParts<T>::gather_parts(V2<const T> mine, V2<T> all) const {
  const V1<const T> part(mine.data(), mine.size());
  const std::vector<SplitGroup> groups = tp_.expert_part_groups();
  if (groups.size() == 1) return groups[0].comm->allgather<T>(part, values_of(all));
  if (groups.size() != 2) throw std::logic_error("ExpertRowParts: the parts gathered over more than two groups");
  // the first group's parts are consecutive rows (a band): over it, then the bands
  const int64_t band = int64_t(all.extent(0)) / groups[1].size;
  ensure_row_capacity(blocks_, "moe.blocks", band, c_);
  const V2<T> rows = leading_rows(blocks_, band);
  groups[0].comm->allgather<T>(part, values_of(rows));
  groups[1].comm->allgather<T>(V1<const T>(rows.data(), rows.size()), values_of(all));
}

template <class T>
void ExpertRowParts<T>::gather(V2<const T> mine, V2<T> out) const {
  if (columns_ == 1) return gather_parts(mine, out);
  // every rank's rows, of which this rank keeps its column block
  const int64_t n = out.extent(0);
  ensure_row_capacity(wide_, "moe.wide", n, c_);
  const V2<T> whole = leading_rows(wide_, n);
  gather_parts(mine, whole);
  kernels::copy_column_block<T>(out, whole, part_ % columns_ * int64_t(out.extent(1)));
}

template <class T>
void ExpertRowParts<T>::traffic(Traffic& out, int64_t rows, int64_t e) const {
  if (!shared()) return;
  // the input (or output gradient) joined over the columns; the outputs over each group in turn
  const SplitGroup columns = tp_.expert_column_group();
  if (columns.size > 1)
    out.add(columns.name, "allgather", Collective::AllGather, columns.size, rows * c_ / columns.size * e);
  int64_t gathered = rows / parts_;
  for (const SplitGroup& g : tp_.expert_part_groups()) {
    out.add(g.name, "allgather", Collective::AllGather, g.size, gathered * c_ * e);
    gathered *= g.size;
  }
}

template class ExpertRowParts<float>;
template class ExpertRowParts<double>;

}  // namespace strata
