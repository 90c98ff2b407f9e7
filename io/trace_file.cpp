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

void write_chrome_trace(const std::string& path, MPI_Comm comm, const TraceRecorder& trace,
                        const std::string& row_name) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::string mine = "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(rank) +
                     ",\"args\":{\"name\":" + json_string(row_name) + "}}";
  char buf[128];
  for (const auto& e : trace.events()) {
    std::snprintf(buf, sizeof(buf), ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", rank,
                  e.start * 1e6, (e.end - e.start) * 1e6);
    mine += ",\n{\"name\":" + json_string(e.name) + ",\"cat\":" + json_string(e.category) + buf;
  }
  const int length = int(mine.size());
  std::vector<int> lengths(size), offsets(size, 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm);
  std::string all;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    all.resize(size_t(offsets[size - 1] + lengths[size - 1]));
  }
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm);
  if (rank != 0) return;
  std::ofstream out(path);
  if (!out) throw UserError("cannot write the trace file '" + path + "'");
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (int r = 0; r < size; ++r) out << (r ? ",\n" : "") << all.substr(size_t(offsets[r]), size_t(lengths[r]));
  out << "\n]}\n";
  out.close();
  if (!out) throw IoError("writing the trace file '" + path + "' failed (disk full?)");
}

}  // namespace strata
