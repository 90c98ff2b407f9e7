#pragma once
// Writes every rank's TraceRecorder as one Chrome/Perfetto trace (JSON "traceEvents",
// complete events in microseconds), one row per rank: open it in ui.perfetto.dev or
// chrome://tracing, or draw it with tools/plot_trace.py. Collective over comm; rank 0
// writes the file.
#include <mpi.h>

#include <string>

#include "core/trace.hpp"

namespace strata {

// row_name: this rank's row label, e.g. "rank 3 (stage 1)".
void write_chrome_trace(const std::string& path, MPI_Comm comm, const TraceRecorder& trace,
                        const std::string& row_name);

}  // namespace strata
