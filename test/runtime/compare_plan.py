import json
import sys

r = json.load(open(sys.argv[1]))
tol = 1e-6
print("iteration matches plan:", abs(r["iteration_us_mean"] - r["planned_iteration_us"]) <= tol * r["planned_iteration_us"])
ok = 0
for d in r["devices"]:
    planned = sum(b["planned_us"] for b in d["bubbles"])
    measured = sum(b["gap_us_mean"] for b in d["bubbles"])
    ok += abs(planned - measured) <= tol * max(planned, 1.0)
print(f"bubbles match plan on {ok} of {len(r['devices'])} devices")
