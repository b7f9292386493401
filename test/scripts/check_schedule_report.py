#!/usr/bin/env python3
"""Checks pipefill's report against independent truth.

1. Uniform stages, no communication cost: the closed forms
     GPipe, 1F1B:  iteration = (m + p - 1)(F + B),  bubble = (p - 1) / (m + p - 1)
     interleaved:  iteration = m(F + B) + (p - 1)(F + B) / v,
                   bubble = (p - 1) / (v m + p - 1)
2. Non-uniform stage costs with latency and bandwidth: a separate 1F1B
   list-scheduler written here from the textbook recurrences
     F(s, i) = max(previous op on s, F(s-1, i) + comm(s-1))
     B(s, i) = max(previous op on s, B(s+1, i) + comm(s))
   with each stage running warm-up forwards, then one-forward-one-backward.

Usage: check_schedule_report.py BIN_DIR WORK_DIR
"""
import json
import os
import random
import subprocess
import sys

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)


def report(name, text):
    path = os.path.join(WORK, name + ".pbtxt")
    with open(path, "w") as f:
        f.write(text)
    imported = subprocess.run([os.path.join(BIN, "pipefill-translate"), "--import-job", path],
                              check=True, capture_output=True, text=True).stdout
    compiled = subprocess.run([os.path.join(BIN, "pipefill-opt"), "--pipefill-compile"],
                              input=imported, check=True, capture_output=True, text=True).stdout
    out = subprocess.run([os.path.join(BIN, "pipefill-translate"), "--to-report"],
                         input=compiled, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def spec(p, m, sched, stages, v=1, lat=0.0, bw=0.0):
    text = f"name: \"t\"\npipeline {{ stages: {p} microbatches: {m} schedule: {sched}"
    if v > 1:
        text += f" virtual_stages: {v}"
    text += " }\n"
    for (F, B, act) in stages:
        text += f"stage {{ forward_us: {F} backward_us: {B} activation_bytes: {act} }}\n"
    text += f"hardware {{ gpu_memory_bytes: 80000000000 p2p_latency_us: {lat} p2p_bandwidth_gbps: {bw} }}\n"
    text += "planner { min_bubble_us: 0 reserve_bytes: 0 }\n"
    return text


failures = 0
checked = 0


def expect(what, got, want, tol=1e-9):
    global failures, checked
    checked += 1
    if abs(got - want) > tol * max(1.0, abs(want)):
        failures += 1
        print(f"MISMATCH {what}: got {got!r}, want {want!r}")


# 1. Closed forms.
for sched in ["GPIPE", "ONE_F_ONE_B"]:
    for p in [1, 2, 4, 8]:
        for m in [1, 3, 8, 16]:
            F, B = 130.0, 270.0
            r = report(f"{sched}-{p}-{m}", spec(p, m, sched, [(F, B, 0)]))
            expect(f"{sched} p={p} m={m} iteration", r["iteration_time_us"], (m + p - 1) * (F + B))
            expect(f"{sched} p={p} m={m} bubble", r["bubble_fraction"], (p - 1) / (m + p - 1))
for p in [2, 4, 8]:
    for v in [2, 3]:
        for m in [p, 2 * p, 4 * p]:
            F, B = 120.0, 240.0
            r = report(f"il-{p}-{v}-{m}", spec(p, m, "INTERLEAVED_1F1B", [(F, B, 0)], v=v))
            expect(f"interleaved p={p} v={v} m={m} iteration", r["iteration_time_us"],
                   m * (F + B) + (p - 1) * (F + B) / v)
            expect(f"interleaved p={p} v={v} m={m} bubble", r["bubble_fraction"],
                   (p - 1) / (v * m + p - 1))


# 2. Independent 1F1B list scheduling on non-uniform stages with latency.
def reference_1f1b(p, m, stages, lat, bw):
    def comm(nbytes):
        return lat + (nbytes / (bw * 1e3) if bw > 0 else 0.0)

    orders = []
    for s in range(p):
        warm = min(p - 1 - s, m)
        order = [("F", i) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            order.append(("F", f)); f += 1
            order.append(("B", b)); b += 1
        while b < m:
            order.append(("B", b)); b += 1
        orders.append(order)
    end = {}
    pos = [0] * p
    clock = [0.0] * p
    done = 0
    total = sum(len(o) for o in orders)
    while done < total:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]]
                F, B, _ = stages[s]
                if kind == "F":
                    if s > 0 and ("F", s - 1, i) not in end:
                        break
                    ready = end[("F", s - 1, i)] + comm(stages[s - 1][2]) if s > 0 else 0.0
                    dur = F
                else:
                    if s < p - 1 and ("B", s + 1, i) not in end:
                        break
                    ready = end[("B", s + 1, i)] + comm(stages[s][2]) if s < p - 1 else 0.0
                    dur = B
                start = max(clock[s], ready)
                clock[s] = start + dur
                end[(kind, s, i)] = clock[s]
                pos[s] += 1
                done += 1
                progressed = True
        assert progressed, "reference deadlocked"
    return max(clock)


rng = random.Random(7)
for trial in range(25):
    p = rng.randint(2, 8)
    m = rng.randint(1, 12)
    stages = [(round(rng.uniform(50, 400), 3), round(rng.uniform(80, 900), 3),
               rng.randint(0, 50_000_000)) for _ in range(p)]
    lat = round(rng.uniform(0, 30), 3)
    bw = rng.choice([0.0, 12.5, 25.0, 100.0])
    r = report(f"ref-{trial}", spec(p, m, "ONE_F_ONE_B", stages, lat=lat, bw=bw))
    want = reference_1f1b(p, m, stages, lat, bw)
    expect(f"1F1B trial {trial} (p={p} m={m} lat={lat} bw={bw}) iteration",
           r["iteration_time_us"], want, tol=1e-9)
    busy = sum(st["busy_us"] for st in r["stages"])
    idle = sum(st["idle_us"] for st in r["stages"])
    expect(f"trial {trial} busy+idle", busy + idle, p * r["iteration_time_us"], tol=1e-9)
    for st in r["stages"]:
        expect(f"trial {trial} stage {st['stage']} bubbles sum to idle",
               sum(b["duration_us"] for b in st["bubbles"]), st["idle_us"], tol=1e-9)

print(f"{checked - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
