"""Checks a `pipefill-run --trace` file against the program's plan and the run report.

usage: check_run_trace.py TRACE REPORT MODE
  MODE modelled: a run with --time-model modelled --no-fill. That model reproduces the plan
        exactly (plan-fidelity.test), so every compute event must last its planned_us and the
        plan's track must sit exactly on the run's main stream: a trace in real rather than
        modelled microseconds (at --time-scale 0.1) or a plan track placed wrongly fails.
  MODE replay: a measured replay run (--stage 0) with fill. Device 0 is measured, the others
        emulated; fill events are the chunks the report counted, each inside a device that runs
        fill, in a bubble of its device, labelled measured.
Prints one line per check and "trace ok" when all pass; exits 1 on the first failure.
"""
import collections
import json
import sys

trace = json.load(open(sys.argv[1]))
report = json.load(open(sys.argv[2]))
mode = sys.argv[3]


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        sys.exit(1)


events = trace["traceEvents"]
slices = [e for e in events if e["ph"] == "X"]
devices = {d["device"]: d for d in report["devices"]}
names = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
check(sorted(names) == sorted(devices), f"one process per device ({len(names)})")
check(trace["otherData"]["time_scale"] == report.get("time_scale", trace["otherData"]["time_scale"]),
      "time scale recorded")

labels = {"measured", "modelled", "emulated", "planned"}
check(all(e["args"].get("time") in labels for e in slices),
      "every slice says where its time came from")
by_cat = collections.Counter(e["cat"] for e in slices)
print("      slices:", dict(sorted(by_cat.items())))

# The plan's track: one slice per main-stream compute and bubble of every iteration.
planned = [e for e in slices if e["cat"] == "planned"]
check(all(e["args"]["time"] == "planned" for e in planned) and planned,
      f"the plan's track is labelled planned ({len(planned)} slices)")
compute = [e for e in slices if e["cat"] == "compute"]
check(compute and not any(e["args"]["time"] == "planned" for e in compute),
      "no run slice is labelled planned")


def source_of(pid):
    return devices[pid]["time_source"]


check(all(e["args"]["time"] == source_of(e["pid"]) for e in compute),
      "compute slices carry their device's time source (measured / modelled / emulated)")

if mode == "modelled":
    check(all(source_of(p) == "modelled" for p in devices), "every device modelled")
    bad = [e for e in compute if abs(e["dur"] - e["args"]["planned_us"]) > 1e-6 * e["args"]["planned_us"] + 1e-3]
    check(not bad, f"modelled compute lasts its planned time in plan units ({len(compute)} slices; "
                   f"first mismatch {bad[:1]})")
    # The plan track on the run's main stream: every compute and every bubble starts and ends at
    # the same instants in both (a tail bubble and the next iteration's warm-up bubble included,
    # which share one idle stretch of the main stream). The run's very last bubble has no end.
    def key(e):
        return (e["pid"], e["args"]["iteration"], e["name"], round(e["ts"], 2),
                round(e["ts"] + e["dur"], 2))
    last = trace["otherData"]["first_iteration"] + trace["otherData"]["iterations"] - 1
    mains = {key(e) for e in compute + [e for e in slices if e["cat"] == "bubble"]}
    missing = [e for e in planned if key(e) not in mains and
               not (e["name"] == "bubble (tail)" and e["args"]["iteration"] == last)]
    check(not missing, f"the plan's track sits on the modelled run's main stream "
                       f"({len(planned)} slices; first miss {missing[:1]})")
    check(not [e for e in slices if e["cat"] == "fill"], "no fill in a --no-fill run")
elif mode == "replay":
    check(source_of(0) == "measured" and all(source_of(p) == "emulated" for p in devices if p),
          "device 0 measured, the others emulated")
    fill = [e for e in slices if e["cat"] == "fill"]
    chunks_run = sum(j["chunks_run"] for j in report["fill"]["jobs"])
    check(len(fill) == chunks_run and chunks_run > 0,
          f"one fill slice per chunk run ({len(fill)} slices, report: {chunks_run})")
    fill_devices = {d["device"] for d in report["devices"] if d.get("fill")}
    check({e["pid"] for e in fill} <= fill_devices,
          f"fill only on devices that run it ({sorted({e['pid'] for e in fill})})")
    check(all(e["args"]["time"] == "measured" for e in fill), "fill slices are measured")
    bubbles = {(e["pid"], e["args"]["iteration"], e["args"]["bubble_id"])
               for e in slices if e["cat"] == "bubble"}
    orphans = [e for e in fill
               if (e["pid"], e["args"]["iteration"], e["args"]["bubble_id"]) not in bubbles]
    check(not orphans, f"every fill slice names a bubble of its device and iteration "
                       f"(first orphan {orphans[:1]})")
    deferred = sum(1 for e in fill if e["args"]["deferred"])
    print(f"      fill slices: {len(fill)}, ran after deferral: {deferred}, "
          f"past their bubble: {sum(1 for e in fill if 'overrun_us' in e['args'])}")
else:
    check(False, f"unknown mode {mode}")
print("trace ok")
