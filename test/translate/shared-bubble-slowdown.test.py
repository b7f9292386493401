import json
import math
import re
import sys

ir = open(sys.argv[1]).read()
report = json.load(open(sys.argv[2]))
iteration_us = report["iteration_time_us"]

stages = re.split(r"\n\s*pipefill\.stage ", ir)[1:]
joint_overrun = []  # per stage: the overrun of its bubbles in its worst iteration
largest_sum_overruns = False
for stage in stages:
    schedule = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in re.finditer(
        r"pipefill\.assignment @(\w+) .*? prefix (\d+) period (\d+)", stage)}
    horizon = max(p for p, _ in schedule.values()) + math.lcm(
        *[q for _, q in schedule.values()]) if schedule else 1
    stage_overrun = 0.0
    for bubble in re.finditer(r"pipefill\.bubble \w+ start \S+ duration (\S+) free \d+ fills \[(.*?)\n\s*\]",
                              stage, re.S):
        duration = float(bubble.group(1))
        totals = {}  # (job, listed iteration) -> us
        for chunk in re.finditer(r"@(\w+) [^,\n]*", bubble.group(2)):
            text = chunk.group(0)
            time = float(re.search(r" time (\S+)", text).group(1))
            repeat = int(re.search(r" repeat (\d+)", text).group(1)) if " repeat " in text else 1
            it = int(re.search(r" iteration (\d+)", text).group(1)) if " iteration " in text else 0
            key = (chunk.group(1), it)
            totals[key] = totals.get(key, 0.0) + time * repeat
        jobs = sorted({j for j, _ in totals})
        largest = sum(max(us for (j, _), us in totals.items() if j == job) for job in jobs)
        largest_sum_overruns |= largest > duration * (1 + 1e-9)
        worst = 0.0
        for t in range(horizon):
            total = 0.0
            for job in jobs:
                prefix, period = schedule[job]
                listed = t if t < prefix else prefix + (t - prefix) % period
                total += totals.get((job, listed), 0.0)
            worst = max(worst, total)
        stage_overrun += max(0.0, worst - duration)
    joint_overrun.append(stage_overrun)

print("jobs' largest iterations together overrun a bubble:", largest_sum_overruns)
print("every iteration fits its bubbles:", all(o <= 1e-6 for o in joint_overrun))
expected = max(joint_overrun) / iteration_us
print("predicted_slowdown is the worst per-iteration overrun:",
      abs(report["fill"]["predicted_slowdown"] - expected) <= 1e-12, report["fill"]["predicted_slowdown"])
