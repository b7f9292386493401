// The run's timeline as a Chrome trace: the JSON object format that chrome://tracing and Perfetto
// (ui.perfetto.dev) open. One process per device, one thread per stream, and one more thread per
// device with the plan's main-stream timeline for comparison. Every event says in its args where
// its time came from: "measured" (a clock read while the work ran), "modelled" (the host's
// modelled transfers and fast model), "emulated" (replay devices) or "planned".
#ifndef PFRT_TRACE_H
#define PFRT_TRACE_H

#include "runtime/Program.h"
#include "runtime/Report.h"

#include <cstdint>
#include <string>

namespace pfrt {

// Timestamps are modelled microseconds from the run's start (real microseconds divided by the
// time scale; the same unit as the plan and the report), so the plan's track lines up at any
// --time-scale.
// A long run keeps its last iterations: those whose ops (all devices' streams) add up to at most
// maxOps (at least one iteration); otherData.note says how many were left out.
std::string runTraceJson(const ReportData &report, const Program &program,
                         uint64_t maxOps = 1000000);

} // namespace pfrt

#endif // PFRT_TRACE_H
