#include "io/trace_file.hpp"

#include <cstdio>
#include <fstream>
#include <vector>

#include "core/error.hpp"

namespace strata {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string trace_row(int rank, const TraceRecorder& trace, const std::string& row_name) {
  const auto row = [&](int tid, const std::string& name) {
    return "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":" + json_string(name) + "}}";
  };
  std::string mine = row(rank, row_name);
  bool in_flight = false;
  char buf[128];
  for (const auto& e : trace.events()) {
    in_flight = in_flight || e.lane == 1;
    std::snprintf(buf, sizeof(buf), ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                  e.lane == 1 ? kInFlightRow + rank : rank, e.start * 1e6, (e.end - e.start) * 1e6);
    mine += ",\n{\"name\":" + json_string(e.name) + ",\"cat\":" + json_string(e.category) + buf;
  }
  if (in_flight) mine += ",\n" + row(kInFlightRow + rank, "rank " + std::to_string(rank) + ": transfers in flight");
  return mine;
}

void write_chrome_trace(const std::string& path, const std::vector<std::string>& all) {
  std::ofstream out(path);
  if (!out) throw UserError("cannot write the trace file '" + path + "'");
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t r = 0; r < all.size(); ++r) out << (r ? ",\n" : "") << all[r];
  out << "\n]}\n";
  out.close();
  if (!out) throw IoError("writing the trace file '" + path + "' failed (disk full?)");
}

}  // namespace strata
