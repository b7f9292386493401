import json
import sys

r = json.load(open(sys.argv[1]))
f = r["fill"]
print("filled_fraction >= 0.9:", f["filled_fraction"] >= 0.9, f["filled_fraction"])
print("predicted_slowdown == 0:", f["predicted_slowdown"] == 0)
print("jobs scheduled:", " ".join(sorted(j["name"] for j in f["jobs"])))
print("efficiencies in (0, 1]:", all(0 < j["efficiency"] <= 1 for j in f["jobs"]))
print("bubbles within idle time:", all(sum(b["duration_us"] for b in s["bubbles"]) <= s["idle_us"] * (1 + 1e-9) for s in r["stages"]))
