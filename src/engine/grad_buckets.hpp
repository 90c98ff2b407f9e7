#pragma once
// How the data-parallel driver groups gradient ranges into all-reduce buckets: ranges
// arrive from the end of the flat buffer towards its start, each adjacent to the one
// before; they are merged until a bucket holds `bucket_bytes` (at least one value), and
// then it is launched.
// The driver launches real all-reduces; the planner counts them.
#include <algorithm>
#include <cstdint>
#include <utility>

namespace strata {

template <class Launch>  // Launch(offset, count)
class GradBuckets {
 public:
  GradBuckets(double bucket_bytes, int64_t value_bytes, Launch launch)
      : bucket_(std::max<int64_t>(1, int64_t(bucket_bytes / double(value_bytes)))), launch_(std::move(launch)) {}
  void ready(int64_t offset, int64_t count) {
    if (hi_ < 0) hi_ = offset + count;
    lo_ = offset;
    if (hi_ - lo_ >= bucket_) flush();
  }
  void flush() {  // launches what is pending (at the end of the backward)
    if (hi_ > lo_) launch_(lo_, hi_ - lo_);
    lo_ = hi_ = -1;
  }

 private:
  int64_t bucket_;  // values
  Launch launch_;
  int64_t lo_ = -1, hi_ = -1;  // the pending bucket [lo, hi), grown downwards
};

}  // namespace strata
