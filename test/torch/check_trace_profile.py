"""Checks profiles made by --torch-trace-to-profile against the traces.

  check_trace_profile.py slow-forward FACTOR IN.json OUT.json
      writes a copy of a torch trace in which every forward's compute
      (the span of the operators nested in its PP:<s>F<mb> range) lasts
      FACTOR times as long: the forward's last operator is stretched and
      every later event of that thread moves back by the added time, so
      nesting and order stay as they were.

  check_trace_profile.py check DEVICES TRACES PROFILE REPORT SLOW_TRACES SLOW_PROFILE SLOW_REPORT
      (TRACES: comma-separated) recomputes every compute action's measured
      time from the raw trace JSON on its own (span of the non-communication
      operator events nested in its PP:<action> range on the same thread)
      and compares it with each profile; then checks that the slow traces'
      forwards measure exactly 2x and everything else the same, and that the
      plans compiled with the two profiles satisfy
      base < slow <= 2 x base (iteration time is monotone in durations and
      scales with them when transfers are free).
"""
import json
import re
import sys

COMM = ("c10d::", "gloo", "nccl", "record_param_comms")
KINDS = {"F": "FORWARD", "B": "BACKWARD", "I": "BACKWARD_INPUT", "W": "BACKWARD_WEIGHT"}
ACTION = re.compile(r"PP:(\d+)([FBIW])(\d+)")


def is_op(e):
    return e.get("cat") == "cpu_op" and not any(c in e["name"] for c in COMM)


def nested(ops, e):
    lo, hi = e["ts"], e["ts"] + e["dur"]
    return [o for o in ops if o["pid"] == e["pid"] and o["tid"] == e["tid"]
            and o["ts"] >= lo and o["ts"] + o["dur"] <= hi + 1e-6]


def from_traces(paths, devices):
    out = {}
    for path in paths.split(","):
        events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
        ops = [e for e in events if is_op(e)]
        for e in events:
            m = ACTION.fullmatch(e["name"])
            if not m:
                continue
            stage, kind, mb = int(m[1]), m[2], int(m[3])
            inner = nested(ops, e)
            span = (max(o["ts"] + o["dur"] for o in inner) - min(o["ts"] for o in inner)
                    if inner else e["dur"])
            out[(stage % devices, KINDS[kind], mb, stage // devices)] = span
    return out


def slow_forward(factor, src, dst):
    trace = json.load(open(src))
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ops = [e for e in events if is_op(e)]
    # Per thread: (time of the forward's end, time added there).
    inserts = {}
    for e in events:
        m = ACTION.fullmatch(e["name"])
        if m and m[2] == "F":
            inner = nested(ops, e)
            if inner:
                end = max(o["ts"] + o["dur"] for o in inner)
                span = end - min(o["ts"] for o in inner)
                inserts.setdefault((e["pid"], e["tid"]), []).append((end, (factor - 1) * span))

    def moved(thread, t):
        return t + sum(add for at, add in inserts.get(thread, []) if at <= t + 1e-9)

    for e in events:
        thread = (e.get("pid"), e.get("tid"))
        start, end = moved(thread, e["ts"]), moved(thread, e["ts"] + e["dur"])
        e["ts"], e["dur"] = start, end - start
    json.dump(trace, open(dst, "w"))


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


def close(a, b):
    return abs(a - b) <= 1e-3 * max(1.0, abs(b))


def check(argv):
    devices = int(argv[0])
    runs = []
    for traces, profile, report in (argv[1:4], argv[4:7]):
        want, got = from_traces(traces, devices), from_profile(profile)
        if set(want) != set(got):
            sys.exit(f"{profile}: actions differ from the traces: {sorted(set(want) ^ set(got))}")
        for key, value in want.items():
            if not close(got[key], value):
                sys.exit(f"{profile}: {key} measured {got[key]} but the trace says {value}")
        iteration = json.load(open(report))["iteration_time_us"]
        runs.append((got, iteration))
        print(f"{profile}: {len(got)} actions match the traces; planned iteration {iteration:.1f} us")
    (base, base_it), (slow, slow_it) = runs
    for key, value in base.items():
        expect = 2 * value if key[1] == "FORWARD" else value
        if not close(slow[key], expect):
            sys.exit(f"{key}: slow profile measures {slow[key]}, expected {expect}")
    print(f"forwards measure 2x, the rest the same; planned iteration "
          f"{base_it:.1f} -> {slow_it:.1f} us (x{slow_it / base_it:.3f})")
    if not (base_it < slow_it <= 2 * base_it * (1 + 1e-9)):
        sys.exit("the planned iteration does not grow within (base, 2 x base]")


def main():
    if sys.argv[1] == "slow-forward":
        slow_forward(float(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        check(sys.argv[2:])


if __name__ == "__main__":
    main()
