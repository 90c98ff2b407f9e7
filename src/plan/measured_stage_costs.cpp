#include "plan/measured_stage_costs.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"

namespace strata {
namespace {

struct Row {
  int64_t step = 0;
  int stage = 0;
  double compute = 0, wait = 0, comm = 0, forward = 0, backward = 0, step_seconds = 0, micro_batches = 1;
};

std::vector<std::string> split_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  return cells;
}

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) throw UserError("--stage-costs: cannot read " + path);
  const std::vector<std::string> header = split_cells(line);
  const auto column = [&](const char* name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw UserError(
          strfmt("--stage-costs: %s has no column \"%s\" (a pipeline run's stages.csv)", path.c_str(), name));
    return size_t(it - header.begin());
  };
  const size_t step = column("step"), stage = column("stage"), compute = column("compute_s"), wait = column("wait_s"),
               comm = column("comm_s"), forward = column("forward_s"), backward = column("backward_s"),
               seconds = column("step_s"), micro = column("micro_batches");
  std::vector<Row> rows;
  for (int n = 2; std::getline(in, line); ++n) {
    const std::vector<std::string> c = split_cells(line);
    if (c.size() != header.size()) throw UserError(strfmt("--stage-costs: %s line %d is not a row", path.c_str(), n));
    try {
      rows.push_back({std::stoll(c[step]), std::stoi(c[stage]), std::stod(c[compute]), std::stod(c[wait]),
                      std::stod(c[comm]), std::stod(c[forward]), std::stod(c[backward]), std::stod(c[seconds]),
                      std::stod(c[micro])});
    } catch (const std::exception&) {
      throw UserError(strfmt("--stage-costs: %s line %d holds a value that is not a number", path.c_str(), n));
    }
  }
  for (const Row& r : rows)
    if (r.micro_batches < 1)
      throw UserError(strfmt("--stage-costs: %s has a row of step %lld with micro_batches below 1", path.c_str(),
                             (long long)r.step));
  if (rows.empty()) throw UserError("--stage-costs: " + path + " has no rows");
  return rows;
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

MeasuredStages read_stage_costs(const std::string& stages_csv, int stages) {
  std::vector<Row> rows = read_rows(stages_csv);
  MeasuredStages m;
  // the first two steps warm up (as the benchmarks' medians of steps 3.. have it): left
  // out where the file has later ones, else the first where it has another
  const int64_t first = rows.front().step, last = rows.back().step;
  const int64_t from = last >= first + 2 ? first + 2 : last > first ? first + 1 : first;
  // a row holds the window of steps since the row before it (run.log_every)
  m.first_step = 1;
  for (const Row& r : rows)
    if (r.step < from) m.first_step = r.step + 1;
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const Row& r) { return r.step < from; }), rows.end());
  m.last_step = last;
  // per stage, per step: the mean over the stage's ranks; then the median over steps
  std::map<std::pair<int, int64_t>, std::vector<Row>> by_stage_step;
  std::map<int64_t, std::vector<double>> outside_by_step, comm_by_step, seconds_by_step;
  for (const Row& r : rows) {
    if (r.stage < 0 || r.stage >= stages)
      throw UserError(
          strfmt("--stage-costs: %s has stage %d; the deck has %d stages", stages_csv.c_str(), r.stage, stages));
    by_stage_step[{r.stage, r.step}].push_back(r);
    outside_by_step[r.step].push_back(r.step_seconds - r.compute - r.wait - r.comm);
    comm_by_step[r.step].push_back(r.comm);
    seconds_by_step[r.step].push_back(r.step_seconds);
  }
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
  };
  m.costs.stage_forward.assign(size_t(stages), 0.0);
  m.costs.stage_backward.assign(size_t(stages), 0.0);
  for (int s = 0; s < stages; ++s) {
    std::vector<double> forward, backward;
    for (const auto& [key, group] : by_stage_step) {
      if (key.first != s) continue;
      std::vector<double> f, b;
      for (const Row& r : group) f.push_back(r.forward / r.micro_batches), b.push_back(r.backward / r.micro_batches);
      forward.push_back(mean(f));
      backward.push_back(mean(b));
    }
    if (forward.empty()) throw UserError(strfmt("--stage-costs: %s has no row of stage %d", stages_csv.c_str(), s));
    m.costs.stage_forward[size_t(s)] = median(forward);
    m.costs.stage_backward[size_t(s)] = median(backward);
  }
  std::vector<double> outside, seconds;
  // a collective's seconds on the rank that came to it last (the others' are waits for it)
  for (const auto& [step, v] : outside_by_step)
    outside.push_back(mean(v) + *std::min_element(comm_by_step[step].begin(), comm_by_step[step].end()));
  for (const auto& [step, v] : seconds_by_step) seconds.push_back(mean(v));
  m.outside = std::max(0.0, median(outside));
  m.step = median(seconds);
  return m;
}

}  // namespace strata
