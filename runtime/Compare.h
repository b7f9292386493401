// pfrt_compare: the main job's slowdown from fill, measured by alternating main-only (A) and
// main + fill (B) runs in ABBA blocks after an A/A pair (the noise floor).
#ifndef PFRT_COMPARE_H
#define PFRT_COMPARE_H

#include "runtime/pfrt.h"

#include <string>

namespace pfrt {

// Runs the comparison; throws Error on failure (a failing run names its position, e.g. "B run 3").
pfrt_compare_result runCompare(pfrt_program *program, const pfrt_options &options,
                               uint32_t repetitions);
std::string formatCompare(const pfrt_compare_result &result, bool json);

// Which run of a comparison this thread's pfrt_run is, as "N (run k of M)" for N ABBA blocks;
// "none" outside pfrt_compare. Rank mode checks that every rank runs the same comparison
// (Executor::checkRanksAgree): ranks given different N ran different numbers of runs.
std::string currentCompareRun();

} // namespace pfrt

#endif // PFRT_COMPARE_H
