"""Checks the fill account of a report JSON (stdin): every stage's planned
bubble time adds up, and the plan-wide fractions agree with the stages."""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--useful-fraction", type=float)
args = parser.parse_args()
report = json.load(sys.stdin)
fill = report["fill"]
errors = []


def close(a, b, scale):
    return abs(a - b) <= 1e-6 * max(1.0, abs(scale))


bubble = filled = useful = 0.0
for stage in report["stages"]:
    acc = stage.get("fill_account")
    if acc is None:
        errors.append(f"stage {stage['stage']}: no fill_account")
        continue
    s = stage["stage"]
    b = sum(x["duration_us"] for x in stage["bubbles"])
    if not close(acc["bubble_us"], b, b):
        errors.append(f"stage {s}: bubble_us {acc['bubble_us']} != sum of bubbles {b}")
    if not close(acc["filled_us"] + acc["idle_us"], acc["bubble_us"], b):
        errors.append(f"stage {s}: filled + idle != bubble_us")
    parts = acc["useful_us"] + acc["switch_us"] + acc["launch_us"] + acc["other_overhead_us"]
    if not close(acc["filled_us"], parts, b):
        errors.append(f"stage {s}: filled_us {acc['filled_us']} != useful + switches + launches + other ({parts})")
    reasons = acc["margin_us"] + acc["too_short_us"] + acc["memory_us"] + acc["granularity_us"]
    if not close(acc["idle_us"], reasons, b):
        errors.append(f"stage {s}: idle_us {acc['idle_us']} != margin + reasons ({reasons})")
    listed = sum(r["us"] for r in acc["idle_reasons"])
    if not close(listed, reasons, b):
        errors.append(f"stage {s}: idle_reasons add up to {listed}, not {reasons}")
    for key, value in acc.items():
        if key != "idle_reasons" and value < -1e-9:
            errors.append(f"stage {s}: {key} is negative ({value})")
    bubble += acc["bubble_us"]
    filled += acc["filled_us"]
    useful += acc["useful_us"]

if bubble > 0:
    if abs(fill["filled_fraction"] - filled / bubble) > 1e-6:
        errors.append(f"filled_fraction {fill['filled_fraction']} != {filled / bubble}")
    if abs(fill["useful_fraction"] - useful / bubble) > 1e-6:
        errors.append(f"useful_fraction {fill['useful_fraction']} != {useful / bubble}")
if fill["useful_fraction"] > fill["filled_fraction"] + 1e-12:
    errors.append("useful_fraction exceeds filled_fraction")
if args.useful_fraction is not None and abs(fill["useful_fraction"] - args.useful_fraction) > 1e-4:
    errors.append(f"useful_fraction {fill['useful_fraction']}, expected {args.useful_fraction}")
for e in errors:
    print(e, file=sys.stderr)
sys.exit(1 if errors else 0)
