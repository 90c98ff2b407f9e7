#pragma once
// How the data-parallel driver groups gradient ranges into all-reduce buckets: ranges
// arrive from the end of the flat buffer towards its start, each adjacent to the one
// before; they are merged until a bucket holds `bucket` values, and then it is launched.
// The driver launches real all-reduces; the planner counts them.
#include <cstdint>
#include <utility>

namespace strata {

template <class Launch>  // Launch(offset, count)
class GradBuckets {
 public:
  GradBuckets(int64_t bucket, Launch launch) : bucket_(bucket), launch_(std::move(launch)) {}
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
  int64_t bucket_;
  Launch launch_;
  int64_t lo_ = -1, hi_ = -1;  // the pending bucket [lo, hi), grown downwards
};

}  // namespace strata
