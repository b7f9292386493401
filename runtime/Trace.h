// The run's timeline as a Chrome trace: the JSON object format that chrome://tracing and Perfetto
// (ui.perfetto.dev) open. One process per device, one thread per stream, and one more thread per
// device with the plan's main-stream timeline for comparison. Every event says in its args where
// its time came from: "measured" (a clock read while the work ran), "modelled" (the host's
// modelled transfers and fast model), "emulated" (replay devices) or "planned".
#ifndef PFRT_TRACE_H
#define PFRT_TRACE_H

#include "runtime/Program.h"
#include "runtime/Report.h"

#include <string>

namespace pfrt {

// Timestamps are modelled microseconds from the run's start (real microseconds divided by the
// time scale; the same unit as the plan and the report), so the plan's track lines up at any
// --time-scale.
std::string runTraceJson(const ReportData &report, const Program &program);

} // namespace pfrt

#endif // PFRT_TRACE_H
