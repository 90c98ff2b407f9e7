#include "train/stage_times.hpp"

#include <algorithm>

#include "comm/control.hpp"
#include "core/log.hpp"

namespace strata {
namespace {
constexpr size_t kFields = 6;  // stage, compute, wait, comm, forward, backward
double entry(const Timers& timers, const char* name) {
  const auto it = timers.entries().find(name);
  return it == timers.entries().end() ? 0.0 : it->second.seconds;
}
}  // namespace

StageTimes::StageTimes(MPI_Comm world, int stage, const std::string& csv_path, int64_t resume_after_step,
                       int64_t micro_batches)
    : world_(world), stage_(stage), micro_batches_(micro_batches) {
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &size_);
  if (!csv_path.empty())
    csv_ =
        std::make_unique<MetricsCsv>(csv_path,
                                     std::vector<std::string>{"step", "rank", "stage", "compute_s", "wait_s", "comm_s",
                                                              "forward_s", "backward_s", "step_s", "micro_batches"},
                                     resume_after_step);
  run_.assign(size_t(size_) * kFields, 0.0);
}

std::unique_ptr<StageTimes> StageTimes::for_run(const Grid& grid, const std::string& run_dir, int64_t start_step,
                                                int64_t micro_batches) {
  if (grid.shape().pipeline < 2 || grid.shape().mgrit()) return nullptr;
  const bool writes = grid.world_rank() == 0 && !run_dir.empty();
  return std::make_unique<StageTimes>(grid.world(), grid.coords().pipeline, writes ? run_dir + "/stages.csv" : "",
                                      start_step > 0 ? start_step : -1, micro_batches);
}

StageTimes::Totals StageTimes::read(const Timers& timers) {
  Totals t;
  t.forward = entry(timers, "forward");
  t.backward = entry(timers, "backward");
  t.compute = t.forward + t.backward + entry(timers, "injected_delay");
  t.wait = entry(timers, "pipeline_wait") + entry(timers, "pipeline_drain");
  t.comm = entry(timers, "grad_allreduce") + entry(timers, "dispatch_agree");
  return t;
}

void StageTimes::window_done(int64_t step, int64_t steps, double window_seconds, const Timers& timers) {
  const Totals now = read(timers);
  std::vector<double> all(size_t(size_) * kFields, 0.0);
  double* mine = &all[size_t(rank_) * kFields];
  mine[0] = stage_;
  mine[1] = now.compute - before_.compute;
  mine[2] = now.wait - before_.wait;
  mine[3] = now.comm - before_.comm;
  mine[4] = now.forward - before_.forward;
  mine[5] = now.backward - before_.backward;
  before_ = now;
  sum_over(world_, all);
  if (rank_ != 0) return;
  run_seconds_ += window_seconds;
  for (size_t i = 0; i < all.size(); ++i) run_[i] = i % kFields == 0 ? all[i] : run_[i] + all[i];
  if (!csv_ || steps <= 0) return;
  for (int r = 0; r < size_; ++r) {
    const double* v = &all[size_t(r) * kFields];
    std::vector<double> row{double(step + 1), double(r), v[0]};
    for (size_t f = 1; f < kFields; ++f) row.push_back(v[f] / double(steps));
    row.push_back(window_seconds / double(steps));
    row.push_back(double(micro_batches_));
    csv_->row(row);
  }
}

std::string StageTimes::summary() const {
  if (rank_ != 0 || run_seconds_ <= 0) return "";
  std::vector<double> compute;
  int slowest = 0;
  double waited = 0;
  for (int r = 0; r < size_; ++r) {
    compute.push_back(run_[size_t(r) * kFields + 1]);
    if (compute.back() > compute[size_t(slowest)]) slowest = r;
    waited += run_[size_t(r) * kFields + 2];
  }
  std::vector<double> sorted = compute;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[size_t(size_ - 1) / 2] + sorted[size_t(size_) / 2]) / 2;
  return strfmt("stage %d on rank %d computed %.2fx the median rank's time; the stages waited %.0f%% of the step",
                int(run_[size_t(slowest) * kFields]), slowest, median > 0 ? compute[size_t(slowest)] / median : 1.0,
                100.0 * waited / (double(size_) * run_seconds_));
}

}  // namespace strata
