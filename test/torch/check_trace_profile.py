"""Checks profiles made by --torch-trace-to-profile against the traces.

Usage: check_trace_profile.py DEVICES TRACES PROFILE REPORT SLOW_TRACES SLOW_PROFILE SLOW_REPORT
(TRACES: comma-separated). Recomputes every compute action's measured time
from the raw trace JSON on its own (span of the non-communication operator
events nested in the action's PP:<action> range on the same thread) and
compares it with the profile; then checks that 8x forward work shows: the
mean measured forward grows by more than 1.5x, 1.25 times more than the
backward does, and the plan compiled with the slow profile has a longer
iteration than the one compiled with the normal profile.
"""
import json
import re
import sys

COMM = ("c10d::", "gloo", "nccl", "record_param_comms")
KINDS = {"F": "FORWARD", "B": "BACKWARD", "I": "BACKWARD_INPUT", "W": "BACKWARD_WEIGHT"}


def from_traces(paths, devices):
    out = {}
    for path in paths.split(","):
        events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
        ops = [e for e in events if e.get("cat") == "cpu_op"
               and not any(c in e["name"] for c in COMM)]
        for e in events:
            m = re.fullmatch(r"PP:(\d+)([FBIW])(\d+)", e["name"])
            if not m:
                continue
            stage, kind, mb = int(m[1]), m[2], int(m[3])
            lo, hi = e["ts"], e["ts"] + e["dur"]
            inner = [o for o in ops if o["pid"] == e["pid"] and o["tid"] == e["tid"]
                     and o["ts"] >= lo and o["ts"] + o["dur"] <= hi + 1e-6]
            span = (max(o["ts"] + o["dur"] for o in inner) - min(o["ts"] for o in inner)
                    if inner else e["dur"])
            out[(stage % devices, KINDS[kind], mb, stage // devices)] = span
    return out


def from_profile(path):
    text = open(path).read()
    out, device = {}, -1
    for block in re.split(r"\nstages \{", text)[1:]:
        device += 1
        for ins in re.findall(r"instructions \{(.*?)\n  \}", block, re.S):
            field = lambda k, d: (re.search(rf"\b{k}: (\S+)", ins) or [None, d])[1]
            key = (device, field("kind", "KIND_UNSPECIFIED"), int(field("microbatch", 0)),
                   int(field("chunk", 0)))
            out[key] = float(field("measured_us", 0))
    return out


def mean(values):
    return sum(values) / len(values)


def main():
    devices = int(sys.argv[1])
    runs = []
    for traces, profile, report in (sys.argv[2:5], sys.argv[5:8]):
        want, got = from_traces(traces, devices), from_profile(profile)
        if set(want) != set(got):
            sys.exit(f"{profile}: actions differ from the traces: {sorted(set(want) ^ set(got))}")
        for key, value in want.items():
            if abs(got[key] - value) > 1e-3 * max(1.0, value):
                sys.exit(f"{profile}: {key} measured {got[key]} but the trace says {value}")
        iteration = json.load(open(report))["iteration_time_us"]
        runs.append((got, iteration))
        print(f"{profile}: {len(got)} actions match the traces; planned iteration {iteration:.1f} us")
    (base, base_it), (slow, slow_it) = runs
    fwd = mean([v for k, v in slow.items() if k[1] == "FORWARD"]) / \
        mean([v for k, v in base.items() if k[1] == "FORWARD"])
    bwd = mean([v for k, v in slow.items() if k[1] == "BACKWARD"]) / \
        mean([v for k, v in base.items() if k[1] == "BACKWARD"])
    print(f"measured forward x{fwd:.2f}, backward x{bwd:.2f}; planned iteration "
          f"{base_it:.1f} -> {slow_it:.1f} us")
    if not (fwd > 1.5 and fwd > 1.25 * bwd and slow_it > base_it):
        sys.exit("8x forward work does not show in the profile and the plan")


if __name__ == "__main__":
    main()
