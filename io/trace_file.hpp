#pragma once
// Writes every rank's TraceRecorder as one Chrome/Perfetto trace (JSON "traceEvents",
// complete events in microseconds), one row per rank: open it in ui.perfetto.dev or
// chrome://tracing, or draw it with tools/plot_trace.py; a second row per rank shows its
// non-blocking transfers in flight. Each rank formats its own row
// (trace_row); one rank, holding every rank's row, writes the file.
#include <string>
#include <vector>

#include "core/trace.hpp"

namespace strata {

// The row of rank r's transfers in flight (its lane-1 events, Comm::set_trace) is
// kInFlightRow + r, named "rank r: transfers in flight", present when it has events.
constexpr int kInFlightRow = 10000;
// Rank `rank`'s events as the trace's row `row_name` (e.g. "rank 3 (stage 1)").
std::string trace_row(int rank, const TraceRecorder& trace, const std::string& row_name);
// The trace of every rank's row (in rank order), written to path.
void write_chrome_trace(const std::string& path, const std::vector<std::string>& rows);

}  // namespace strata
