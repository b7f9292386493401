#!/usr/bin/env bash
# The closed loop (closed-loop-fill.sh) under two fill policies, alternated N times (whole chunks,
# then heads of chunks), with the median of each round's figures per policy: fill throughput
# measured/planned, planned fill / bubble, overrun / fill time. Same environment variables as
# closed-loop-fill.sh (ITERATIONS defaults to 8 here). Usage:
#   runtime/tools/closed-loop-fill/policy-ab.sh [N (default 8)] [JOB.pbtxt] [STAGE]
set -euo pipefail
cd "$(dirname "$0")/../../.."
N=${1:-8}
shift || true
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export ITERATIONS=${ITERATIONS:-8}
for i in $(seq 1 "$N"); do
  for policy in whole bounded; do
    PFRT_FILL_POLICY=$policy OUT="$OUT/$policy-$i" \
      runtime/tools/closed-loop-fill/closed-loop-fill.sh "$@" > "$OUT/$policy-$i.txt"
  done
done
python3 - "$OUT" "$N" <<'PY'
import statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
print(f"fill policy A/B over {n} alternating closed loops, results in {out}")
print(f"{'policy':>8} {'round':>6} {'fill thr. meas/plan':>20} {'planned fill/bubble':>20} "
      f"{'overrun/fill':>13}   (medians; min-max of throughput)")
for policy in ("whole", "bounded"):
    rows = {}
    for i in range(1, n + 1):
        for line in open(f"{out}/{policy}-{i}.txt"):
            f = line.split()
            if f and f[0] in ("round0", "round1"):
                rows.setdefault(f[0], []).append([float(x) for x in f[1:4]])
    for rnd, vals in sorted(rows.items()):
        cols = list(zip(*vals))
        med = [statistics.median(c) for c in cols]
        print(f"{policy:>8} {rnd:>6} {med[0]:>20.3f} {med[1]:>20.3f} {med[2]:>13.4f}   "
              f"({min(cols[0]):.3f}-{max(cols[0]):.3f})")
PY
