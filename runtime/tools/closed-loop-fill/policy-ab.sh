#!/usr/bin/env bash
# The closed loop (closed-loop-fill.sh) under two settings, alternated N times, with the median of
# each round's figures per setting: fill throughput measured/planned, planned fill / bubble,
# overrun / fill time. By default the settings are two fill policies, whole chunks then heads of
# chunks; SETTINGS="NAME=pipefill-run options;NAME=options" names others, e.g.
#   SETTINGS="shared=;split=--cpu 0 --fill-cpu 1"   (fill on main's core vs on its own core).
# Same environment variables as closed-loop-fill.sh (ITERATIONS defaults to 8 here). Usage:
#   runtime/tools/closed-loop-fill/policy-ab.sh [N (default 8)] [JOB.pbtxt] [STAGE]
set -euo pipefail
cd "$(dirname "$0")/../../.."
N=${1:-8}
shift || true
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export ITERATIONS=${ITERATIONS:-8}
IFS=';' read -r -a SETS <<< "${SETTINGS:-whole=--fill-policy whole;bounded=--fill-policy bounded}"
NAMES=()
for i in $(seq 1 "$N"); do
  for set in "${SETS[@]}"; do
    name=${set%%=*}
    [ "$i" = 1 ] && NAMES+=("$name")
    RUN_ARGS="${set#*=}" OUT="$OUT/$name-$i" \
      runtime/tools/closed-loop-fill/closed-loop-fill.sh "$@" > "$OUT/$name-$i.txt"
  done
done
python3 - "$OUT" "$N" "${NAMES[@]}" <<'PY'
import statistics, sys
out, n, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"A/B over {n} alternating closed loops, results in {out}")
print(f"{'setting':>8} {'round':>6} {'fill thr. meas/plan':>20} {'planned fill/bubble':>20} "
      f"{'overrun/fill':>13} {'waiting/fill':>13}   (medians; min-max of throughput)")
for policy in names:
    rows = {}
    for i in range(1, n + 1):
        for line in open(f"{out}/{policy}-{i}.txt"):
            f = line.split()
            if f and f[0] in ("round0", "round1"):
                waiting = float(f[5]) if len(f) > 5 else 0.0
                rows.setdefault(f[0], []).append([float(x) for x in f[1:4]] + [waiting])
    for rnd, vals in sorted(rows.items()):
        cols = list(zip(*vals))
        med = [statistics.median(c) for c in cols]
        print(f"{policy:>8} {rnd:>6} {med[0]:>20.3f} {med[1]:>20.3f} {med[2]:>13.4f} "
              f"{med[3]:>13.4f}   "
              f"({min(cols[0]):.3f}-{max(cols[0]):.3f})")
PY
